// Command jaegerbin builds Jaeger's all-in-one program into
// <repo>/.bin/jaeger from the nested tools module steps/jaegersvc/tools
// (make jaeger-bin), for the tests that look at exported spans in a real
// tracing backend. It does nothing when the binary is up to date, and
// prints where it is.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/gwdiag/gwdiag/steps/jaegersvc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	p, err := jaegersvc.EnsureBinary(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jaeger-bin:", err)
		os.Exit(1)
	}
	fmt.Println(p)
}
