// Command fetch GETs its argument and exits 0 on a 200, 1 otherwise: a pod
// of the node tests that shows pods reach each other across the bridge.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
}
