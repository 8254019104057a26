package steps

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/container/containertest"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// quitScenario is the core scenario a proxy that ignores /quitquitquit
// must fail, and its bound ("within 5 seconds").
const (
	quitScenario = "quitquitquit shuts the proxy down gracefully"
	quitBound    = 5 * time.Second
)

// TestIgnoredQuitFailsAtItsBound (issue 24): a proxy whose /quitquitquit
// answers 200 and then keeps serving fails the quit scenario on every
// target that can run it, at the scenario's bound (not before it, and not
// hanging on past it), with a
// message naming the listener that still accepts connections. The wait
// once read its own deadline as "the listener is closed" and passed such
// a proxy after 5 s.
func TestIgnoredQuitFailsAtItsBound(t *testing.T) {
	// Beside the other parallel tests: run alone first, its container case
	// (which builds the test images when it is the first to ask) held every
	// parallel test of the package for minutes. Its bounds are measured
	// from the quit to the scenario's end, with slack for a loaded machine.
	t.Parallel()
	// The same step passes a proxy that does stop: it does not fail
	// everything. Its wait fails when it reaches the bound, so a pass is
	// a listener seen closed before it (no clock read here: a whole Run
	// took 7.4 s on a loaded machine, with the scenario well inside it).
	t.Run("in-process reference proxy that stops", func(t *testing.T) {
		rep, err := Run(context.Background(), Options{TargetImpl: inprocess.New(), Output: &strings.Builder{}, RunScenario: quitScenario})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Scenario(quitScenario); len(got) != 0 || rep.Summary.Passed != 1 {
			t.Errorf("%s: got %+v (summary %+v), want it passed", quitScenario, got, rep.Summary)
		}
	})
	// faulty wraps inner with the fault; its deployment tells when the
	// quit was answered and when the scenario ended.
	faulty := func(inner func(t *testing.T) Options) func(t *testing.T) (Options, *faultyTarget) {
		return func(t *testing.T) (Options, *faultyTarget) {
			o := inner(t)
			ft := &faultyTarget{inner: o.TargetImpl, fault: faults["ignores quitquitquit"]}
			o.TargetImpl = ft
			return o, ft
		}
	}
	plain := func(o func(t *testing.T) Options) func(t *testing.T) (Options, *faultyTarget) {
		return func(t *testing.T) (Options, *faultyTarget) { return o(t), nil }
	}
	tests := []struct {
		name string
		// opts gives the run's options and, for a proxy behind the fault
		// wrapper, the wrapper (nil: the proxy ignores the quit itself).
		opts func(t *testing.T) (Options, *faultyTarget)
	}{
		{"in-process reference proxy behind the fault", faulty(func(*testing.T) Options {
			return Options{TargetImpl: inprocess.New()}
		})},
		{"in-process spec-minimal proxy", plain(func(*testing.T) Options {
			return Options{TargetImpl: specMinimalTarget{ignoreQuit: true}}
		})},
		{"process target, spec-minimal binary", plain(func(t *testing.T) Options {
			if testing.Short() {
				t.Skip("builds and runs the specminimal binary")
			}
			bin := builtBinary(t, "github.com/gwdiag/gwdiag/steps/specminimal/cmd/specminimal")
			return Options{Target: "process", ProxyCommand: bin + " -ignore-quit -f {config}"}
		})},
		{"container target, reference image behind the fault", faulty(func(t *testing.T) Options {
			if testing.Short() {
				t.Skip("starts two containers")
			}
			proxy, mocks := containertest.Images(t)
			return Options{TargetImpl: container.New(container.Options{Image: proxy, MockImage: mocks, Pull: container.PullNever})}
		})},
	}
	listener := regexp.MustCompile(`^listener (127\.0\.0\.1:\d+) did not stop accepting connections within 5s of /quitquitquit: not within 5s \(\d+ checks\); last seen: a connection to (127\.0\.0\.1:\d+) was accepted`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ft := tt.opts(t)
			o.Output, o.RunScenario, o.BundleDir = &strings.Builder{}, quitScenario, t.TempDir()
			start := time.Now()
			rep, err := Run(context.Background(), o)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Scenario(quitScenario)
			if len(got) != 1 || got[0].Result != Failed {
				t.Fatalf("%s: got %+v, want it failed", quitScenario, got)
			}
			m := listener.FindStringSubmatch(got[0].Message)
			if m == nil || m[1] != m[2] {
				t.Errorf("message: got %q, want it to match %q, naming one listener", got[0].Message, listener)
			}
			// The scenario must not end before its bound (it waited it out)
			// nor hang on past it. From the quit to the scenario's end where
			// the fault's wrapper sees both (about 5.0x s on an idle
			// machine), with slack for a loaded one (load average 20 seen).
			// A proxy that ignores the quit itself has no wrapper (the
			// wrapper's listeners close on a quit passed on): its whole run,
			// which also starts the proxy, is only held to the lower bound
			// and logged; it took 27 s on a loaded machine (a fresh
			// clean-clone run beside other work, 2026-12-01), and the wait
			// is the same step on every target.
			t.Logf("run took %v: %s", took.Round(time.Millisecond), got[0].Message)
			if ft != nil {
				ft.mu.Lock()
				d := ft.last
				ft.mu.Unlock()
				d.mu.Lock()
				took = d.stopAt.Sub(d.quitAt)
				d.mu.Unlock()
				const slack = 5 * time.Second
				t.Logf("from /quitquitquit to the scenario's end: %v", took.Round(time.Millisecond))
				if took < quitBound || took > quitBound+slack {
					t.Errorf("from /quitquitquit to the scenario's end took %v, want within %v past the bound %v", took.Round(time.Millisecond), slack, quitBound)
				}
			} else if took < quitBound {
				t.Errorf("the run took %v, less than the scenario's bound %v: it did not wait it out", took.Round(time.Millisecond), quitBound)
			}
			// The failure's bundle, whatever the target: replayed on the
			// reference it passes; replayed on the same proxy it fails at
			// the same step.
			if got[0].Bundle == "" {
				t.Fatal("the failure left no bundle")
			}
			good, err := Replay(context.Background(), got[0].Bundle, Options{Output: &strings.Builder{}})
			if err != nil || good.Scenario.Result != Passed {
				t.Errorf("replayed on the reference: %v %+v, want passed", err, good)
			}
			if o.Target == "process" {
				bad, err := Replay(context.Background(), got[0].Bundle, Options{Target: "process", ProxyCommand: o.ProxyCommand, Output: &strings.Builder{}})
				if err != nil || !bad.Same() || bad.Scenario.Step != got[0].Step {
					t.Errorf("replayed on the same proxy: %v %+v, want failed at %q", err, bad, got[0].Step)
				}
			}
		})
	}
}
