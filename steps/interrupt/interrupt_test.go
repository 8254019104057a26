package interrupt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the signal goroutine writes while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestContext: the first signal cancels the context with the signal as
// its cause; the second writes what the registered Leftovers say and
// exits with 128+n, as a shell reports a process the signal killed.
func TestContext(t *testing.T) {
	tests := []struct {
		name     string
		sig      syscall.Signal
		wantName string
		wantCode int
	}{
		{"Ctrl-C", syscall.SIGINT, "SIGINT", 130},
		{"CI cancel", syscall.SIGTERM, "SIGTERM", 143},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out syncBuffer
			exited := make(chan int, 1)
			ctx, stop := Context(context.Background(), &out, func(code int) { exited <- code })
			defer stop()
			OnForcedExit(ctx, func() []string { return []string{"container c1: docker rm -f c1"} })
			removed := OnForcedExit(ctx, func() []string { return []string{"cleaned up already"} })
			removed()

			if err := syscall.Kill(os.Getpid(), tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: context not cancelled", tt.wantName)
			}
			sig, ok := Of(ctx)
			if !ok || sig.Name() != tt.wantName || sig.ExitCode() != tt.wantCode || Reason(ctx) != tt.wantName {
				t.Fatalf("after %s: got signal %v (ok %v), exit code %d, reason %q; want %s, %d", tt.wantName, sig.Sig, ok, sig.ExitCode(), Reason(ctx), tt.wantName, tt.wantCode)
			}
			var c interface{ ExitCode() int }
			if !errors.As(error(sig), &c) || c.ExitCode() != tt.wantCode {
				t.Errorf("Signal as an error: want an exit coder of %d", tt.wantCode)
			}
			select {
			case code := <-exited:
				t.Fatalf("exited with %d after one signal; want to wait for the clean-up", code)
			default:
			}

			if err := syscall.Kill(os.Getpid(), tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-exited:
				if code != tt.wantCode {
					t.Errorf("second %s: exit %d, want %d", tt.wantName, code, tt.wantCode)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("second %s: no exit", tt.wantName)
			}
			got := out.String()
			for _, want := range []string{tt.wantName + " again: exiting now", "  - container c1: docker rm -f c1\n"} {
				if !strings.Contains(got, want) {
					t.Errorf("second signal wrote %q; want it to contain %q", got, want)
				}
			}
			if strings.Contains(got, "cleaned up already") {
				t.Errorf("second signal wrote %q: a removed Leftovers was asked", got)
			}
		})
	}
}

// TestStopIsNoInterrupt: a command that ends on its own cancels the
// context without a signal cause.
func TestStopIsNoInterrupt(t *testing.T) {
	ctx, stop := Context(context.Background(), &bytes.Buffer{}, func(int) { t.Error("exit called") })
	stop()
	stop()
	if _, ok := Of(ctx); ok || ctx.Err() == nil {
		t.Errorf("after stop: Of ok %v, Err %v; want no signal, a cancelled context", ok, ctx.Err())
	}
}
