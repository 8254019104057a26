package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// TestConfigDumpBounds: a dump that never ends, a dump that drips and a
// header block that never ends each end ConfigDump in bounded time with
// what was exceeded, over real HTTP.
func TestConfigDumpBounds(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"endless dump", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"binds":[`))
			for r.Context().Err() == nil {
				if _, err := w.Write([]byte(`{"port":1},`)); err != nil {
					return
				}
			}
		}, "config dump exceeds 4 KiB (proxy sent at least 4097 bytes)"},
		{"dripping dump", func(w http.ResponseWriter, r *http.Request) {
			for r.Context().Err() == nil {
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
			}
		}, "config dump did not arrive within 500ms"},
		{"endless header", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Big", strings.Repeat("a", 8<<10))
		}, "response header block exceeds 4 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			c := &Client{BaseURL: srv.URL, Limits: sse.Limits{BodyBytes: 4 << 10, HeaderBytes: 4 << 10}, Timeout: 500 * time.Millisecond}
			start := time.Now()
			_, err := c.ConfigDump(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

// TestReadStreamBounds: past a bound, ReadStream returns the *LimitError
// (and ErrIncomplete); a follow stream bounds each trace on its own.
func TestReadStreamBounds(t *testing.T) {
	ev := func(typ string) string { return `data: {"severity":"info","message":{"type":"` + typ + `"}}` + "\n\n" }
	three := ev("requestStarted") + ev("routeSelection") + ev("requestFinished")
	tests := []struct {
		name   string
		stream string
		follow bool
		want   string
	}{
		{"too many events", ev("requestStarted") + ev("routeSelection") + ev("policySelection") + ev("backendCallStart"), false, "trace exceeds 3 events (proxy sent at least 4)"},
		{"one trace at the bound", three, false, ""},
		{"follow: each trace at the bound", three + three + three, true, ""},
		{"event too large", "data: {\"message\":{\"type\":\"requestStarted\",\"x\":\"" + strings.Repeat("a", 300) + "\"}}\n\n", false, "trace event exceeds 256 bytes"},
	}
	for _, tt := range tests {
		for _, headerOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/headerOnly=%v", tt.name, headerOnly), func(t *testing.T) {
				err := ReadStream(strings.NewReader(tt.stream), Handler{Follow: tt.follow, HeaderOnly: headerOnly, Limits: sse.Limits{TraceEvents: 3, EventBytes: 256}})
				if tt.want == "" {
					if err != nil {
						t.Fatalf("got %v, want nil", err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) || !sse.IsLimit(err) || !errors.Is(err, ErrIncomplete) {
					t.Fatalf("got %v, want a limit error containing %q", err, tt.want)
				}
			})
		}
	}
}

// TestRealDumpsUnderDefaults: every /config_dump the real implementation
// produced reads whole through ConfigDump under the default bounds.
func TestRealDumpsUnderDefaults(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "agentgateway", "*.json"))
	if len(files) == 0 {
		t.Fatal("no dumps in testdata/agentgateway")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(want) }))
			defer srv.Close()
			got, err := (&Client{BaseURL: srv.URL}).ConfigDump(context.Background())
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("got %d bytes, %v; want the %d bytes of the dump", len(got), err, len(want))
			}
		})
	}
}

// TestLimitFlagsCheck: a bound set to zero or less is refused with the
// flag's name; one left alone, or set positive, is not.
func TestLimitFlagsCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"defaults", nil, ""},
		{"positive", []string{"--max-event-bytes", "10", "--frame-timeout", "1s"}, ""},
		{"zero bytes", []string{"--max-event-bytes", "0"}, "--max-event-bytes 0: want a positive bound"},
		{"negative events", []string{"--max-trace-events", "-1"}, "--max-trace-events -1: want a positive bound"},
		{"zero time", []string{"--frame-timeout", "0s"}, "--frame-timeout 0s: want a positive bound"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var l LimitFlags
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			l.AddStreamFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got := ""
			if err := l.Check(fs); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
