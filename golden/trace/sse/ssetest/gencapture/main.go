// Command gencapture writes a long trace capture to stdout, for measuring
// gwdiag on it (docs/benchmarks.md):
//
//	go run ./golden/trace/sse/ssetest/gencapture -events 1000000 -ids > /tmp/capture.jsonl
//	go run ./golden/trace/sse/ssetest/gencapture -events 1000000 -ids -change 40000 > /tmp/changed.jsonl
//	go run ./golden/trace/sse/ssetest/gencapture -events 1000000 -ids -id-base 1000000 > /tmp/rerun.jsonl
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

func main() {
	o := ssetest.Options{}
	flag.IntVar(&o.Events, "events", 1_000_000, "events in the capture (rounded up to whole traces of 12)")
	flag.BoolVar(&o.IDs, "ids", false, "give each trace a requestId, as a followed capture has")
	flag.IntVar(&o.IDBase, "id-base", 0, "added to the traces' numbers to make their ids (a second run's capture has other ids)")
	flag.IntVar(&o.ChangeTrace, "change", 0, "trace (1-based) whose backendCallResult status becomes 503")
	flag.Parse()
	if o.ChangeTrace > 0 {
		o.Change = func(l string) string { return strings.Replace(l, `"status":200`, `"status":503`, 1) }
	}
	if _, err := ssetest.Write(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "gencapture:", err)
		os.Exit(1)
	}
}
