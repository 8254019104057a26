package container_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/container/containertest"
	"github.com/gwdiag/gwdiag/steps/targets/process"
	"github.com/gwdiag/gwdiag/steps/targets/targettest"
)

// BenchmarkTargets measures the container target, on its own network
// (container) and in this machine's (container-host), beside the process
// target, the reference proxy on each, in one run:
//
//	go test -run '^$' -bench Targets -benchtime 1x ./steps/targets/container   # whole suite
//	go test -run '^$' -bench 'Targets/configure' -benchtime 20x ./steps/targets/container
//
// suite/* is one whole run of every feature; configure/* is one scenario's
// deployment (mocks and proxy started, ready, stopped). The container
// target also reports its proxies' start-to-ready time (ready-ms, the
// median over the proxies it started).
func BenchmarkTargets(b *testing.B) {
	proxyImage, mockImage := containertest.Images(b)
	bin := filepath.Join(b.TempDir(), "refproxy")
	if err := toolbin.BuildStatic(context.Background(), "", bin, "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy"); err != nil {
		b.Fatal(err)
	}
	newTarget := map[string]func() targets.Target{
		"process": func() targets.Target { return process.New(bin + " --bind-host 127.0.0.1 -f {config}") },
		"container": func() targets.Target {
			return container.New(container.Options{Image: proxyImage, MockImage: mockImage, Pull: container.PullNever})
		},
		"container-host": func() targets.Target {
			return container.New(container.Options{Image: proxyImage, MockImage: mockImage, Pull: container.PullNever, Network: container.NetworkHost})
		},
	}
	names := []string{"process", "container", "container-host"}
	for _, name := range names {
		b.Run("suite/"+name, func(b *testing.B) {
			for b.Loop() {
				tgt := newTarget[name]()
				rep, err := steps.Run(context.Background(), steps.Options{TargetImpl: tgt, AllFeatures: true, Output: &strings.Builder{}})
				if err != nil || rep.Failed() {
					b.Fatalf("run: %v, %+v", err, rep.Summary)
				}
				reportReady(b, tgt)
			}
		})
	}
	for _, name := range names {
		b.Run("configure/"+name, func(b *testing.B) {
			ctx := context.Background()
			tgt := newTarget[name]()
			if err := tgt.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer tgt.Stop(ctx)
			for b.Loop() {
				d, err := tgt.Configure(ctx, targettest.OneRoute)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportReady(b, tgt)
		})
	}
}

// reportReady reports the median start-to-ready time of a container
// target's proxies.
func reportReady(b *testing.B, tgt targets.Target) {
	c, ok := tgt.(*container.Container)
	if !ok {
		return
	}
	rt := c.ReadyTimes()
	if len(rt) == 0 {
		return
	}
	slices.Sort(rt)
	b.ReportMetric(float64(rt[len(rt)/2])/float64(time.Millisecond), "ready-ms")
}
