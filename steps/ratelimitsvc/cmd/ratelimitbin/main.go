// Command ratelimitbin builds the Envoy rate-limit service into
// <repo>/.bin/ratelimit from the nested tools module (make ratelimit-bin);
// run outside a checkout, into the user's cache (ratelimitsvc.EnsureBinary).
// It does nothing when the binary is up to date, and prints where it is.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/gwdiag/gwdiag/steps/ratelimitsvc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	p, err := ratelimitsvc.EnsureBinary(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratelimit-bin:", err)
		os.Exit(1)
	}
	fmt.Println(p)
}
