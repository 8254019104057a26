package stepdefs

import (
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/targets"
)

func TestWindowEndWithin(t *testing.T) {
	// 10:59:58 UTC: the hour's window ends in 2 s, the day's in 13 h 2 s.
	at := time.Date(2026, 11, 30, 10, 59, 58, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		got, u    int64
		sent, arr time.Time
		wantErr   string
	}{
		{"the hour's end", 2, 3600, at, at, ""},
		{"a second late, rounded", 3, 3600, at, at, ""},
		{"the day's end", 13*3600 + 2, 86400, at, at, ""},
		{"the hour's for the day's", 2, 86400, at, at, "got 2, want the seconds until the service's day window ends, 46802"},
		{"a whole window", 3600, 3600, at, at, "got 3600"},
		// The hour ended between sending and arrival: the service may
		// have answered in either window.
		{"across the hour, before", 2, 3600, at, at.Add(3 * time.Second), ""},
		{"across the hour, after", 3599, 3600, at, at.Add(3 * time.Second), ""},
	} {
		err := windowEndWithin(tt.got, tt.u, tt.sent, tt.arr, "Retry-After", map[int64]string{3600: "hour", 86400: "day"}[tt.u])
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

// logDeployment is a replica whose target keeps its output.
type logDeployment struct {
	targets.Deployment
	logs string
}

func (d logDeployment) ProxyLogs() string { return d.logs }

func TestProxyLogsOfReplicas(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n"
	first, second := "refproxy started 1\n"+strings.Repeat(line, 100), "refproxy started 2\n"+strings.Repeat(line, 10)+"last of 2"
	s := &state{deps: []targets.Deployment{logDeployment{logs: first}, logDeployment{logs: second}}}
	s.dep = s.deps[0]
	got := s.proxyLogs()
	// Each replica named, each its share of the bound, each its end.
	for _, want := range []string{"=== replica 1 of 2 ===\n", "=== replica 2 of 2 ===\nrefproxy started 2\n", "last of 2\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("proxy logs lack %q", want)
		}
	}
	if n := len(got); n > targets.MaxProxyLogs+100 {
		t.Errorf("proxy logs of two replicas: %d bytes, want about %d at most", n, targets.MaxProxyLogs)
	}
	if !strings.HasSuffix(got[:strings.Index(got, "=== replica 2")], line) {
		t.Errorf("replica 1's share does not end with its last line")
	}
	// One proxy: its output as the target keeps it, with no heading.
	s = &state{deps: []targets.Deployment{logDeployment{logs: second}}}
	s.dep = s.deps[0]
	if got := s.proxyLogs(); got != second {
		t.Errorf("one proxy's logs: got %q, want them as kept", got)
	}
}
