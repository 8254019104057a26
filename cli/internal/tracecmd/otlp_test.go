package tracecmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/golden/trace/otlp/receiver"
)

func startReceiver(t *testing.T) *receiver.Receiver {
	t.Helper()
	r, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func waitSpans(t *testing.T, r *receiver.Receiver, n int) []receiver.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spans, err := r.Wait(ctx, func(s []receiver.Span) bool { return len(s) >= n })
	if err != nil {
		t.Fatalf("spans: %v", err)
	}
	return spans
}

// TestOTLPExportsARealCapture: `trace -f` of the real proxy's trace with
// --otlp sends it as one trace: the request's span at the trace's own
// startTime, the route, the backend call with its real times; the same
// capture sent twice is the same trace (its ids derive from its bytes).
func TestOTLPExportsARealCapture(t *testing.T) {
	r := startReceiver(t)
	file := realTraces + "k8s-latest.docs.jsonl"
	stdout, stderr, err := runTrace(t, "-f", file, "--otlp", "http://"+r.GRPC)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if stdout != "" || !strings.Contains(stderr, "exported 1 trace to http://"+r.GRPC) {
		t.Errorf("stdout %q, stderr %q: want nothing printed but the export's line", stdout, stderr)
	}
	spans := r.Spans()
	var root, call receiver.Span
	for _, s := range spans {
		switch s.Name {
		case "GET httpbin/httpbin.00.http":
			root = s
		case otlp.NameBackendCall:
			call = s
		}
	}
	start := time.Date(2026, 5, 11, 16, 5, 22, 175838000, time.UTC)
	if !root.Start.Equal(start.Add(time.Microsecond)) || root.Attrs["http.route"] != "httpbin/httpbin.00.http" || root.Service != "gwdiag" {
		t.Errorf("request span %+v: want it at the capture's startTime, its route, service gwdiag", root)
	}
	if !call.Start.Equal(start.Add(153*time.Microsecond)) || !call.End.Equal(start.Add(514*time.Microsecond)) || call.ParentSpanID != root.SpanID {
		t.Errorf("backend call [%v, %v] parent %s: want [153µs, 514µs] after the start, under the request", call.Start, call.End, call.ParentSpanID)
	}
	if _, stderr, err := runTrace(t, "-f", file, "--otlp", "http://"+r.GRPC); err != nil {
		t.Fatalf("again: %v\n%s", err, stderr)
	}
	again := waitSpans(t, r, 2*len(spans))
	if len(receiver.Trace(again, root.TraceID)) != 2*len(spans) {
		t.Errorf("the same capture sent twice made another trace")
	}
}

// TestOTLPExportsWhatItPrints: with --raw the events are printed as
// without --otlp, and the spans carry none of the credentials the capture
// holds (the scrubber's redaction comes first); --otlp-header reaches the
// collector and is never printed. OTLP/HTTP.
func TestOTLPExportsWhatItPrints(t *testing.T) {
	r := startReceiver(t)
	lines := oneTrace(200, "")
	// A credential in a snapshot and in a reason.
	var ev map[string]any
	_ = json.Unmarshal([]byte(lines[1]), &ev)
	ev["message"].(map[string]any)["reasons"] = []map[string]any{{"route": "r", "result": "selected", "reason": "token planted-capture-secret-91 matched"}}
	b, _ := json.Marshal(ev)
	lines[1] = string(b)
	snap := `{"eventStart":null,"eventEnd":150,"severity":"info","message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"GET","path":"/x","headers":{"authorization":"Bearer planted-capture-secret-91","user-agent":"planted-capture-secret-91"}}}}}`
	capture := strings.Join(append(lines[:1], append([]string{snap}, lines[1:]...)...), "\n") + "\n"
	file := filepath.Join(t.TempDir(), "capture.jsonl")
	if err := os.WriteFile(file, []byte(capture), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, _, err := runTrace(t, "-f", file, "--raw")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runTrace(t, "-f", file, "--raw", "--otlp", r.HTTP, "--otlp-protocol", "http", "--otlp-header", "x-collector-token=planted-flag-token-55")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if stdout != plain {
		t.Errorf("--otlp changed what --raw prints:\n%s\nwant\n%s", stdout, plain)
	}
	spans := waitSpans(t, r, 1)
	all, _ := json.Marshal(spans)
	for _, secret := range []string{"planted-capture-secret-91", "planted-flag-token-55"} {
		if strings.Contains(string(all), secret) || strings.Contains(stdout+stderr, secret) && secret == "planted-flag-token-55" {
			t.Errorf("%q exported or printed", secret)
		}
	}
	if strings.Contains(stdout, "planted-capture-secret-91") {
		t.Errorf("--raw printed the capture's credential")
	}
	var token bool
	for _, h := range r.Headers() {
		token = token || h["x-collector-token"] == "planted-flag-token-55"
	}
	if !token {
		t.Error("--otlp-header never reached the collector")
	}
}

// TestOTLPFollowRaw: a live follow stream with --raw --otlp sends each
// request as its own trace.
func TestOTLPFollowRaw(t *testing.T) {
	r := startReceiver(t)
	admin := oneShotProxy{status: []int{200, 503, 429}, ids: []string{"a", "b", "c"}}.start(t)
	_, stderr, err := runTrace(t, "--local", "--admin-url", admin, "--follow", "--max-requests", "3", "--raw", "--otlp", r.GRPC)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "exported 3 traces to "+r.GRPC) {
		t.Errorf("stderr %q", stderr)
	}
	status := map[int64]string{}
	for _, s := range r.Spans() {
		if s.Kind == "SPAN_KIND_SERVER" {
			status[s.Attrs["http.response.status_code"].(int64)] = s.TraceID
			if s.Attrs[otlp.AttrRequestID] == nil {
				t.Errorf("request span %q without its request id", s.Name)
			}
		}
	}
	if len(status) != 3 || status[200] == status[503] || status[503] == status[429] {
		t.Errorf("request spans by status %v: want three traces", status)
	}
}

// TestOTLPCollectorDown: a collector that is not there fails the command
// (exit 1), naming it; what was printed stays printed.
func TestOTLPCollectorDown(t *testing.T) {
	r := startReceiver(t)
	dead := r.GRPC
	r.Close()
	stdout, _, err := runTrace(t, "-f", realTraces+"k8s-latest.docs.jsonl", "--raw", "--otlp", dead)
	if err == nil || !strings.Contains(err.Error(), "the OTLP collector at "+dead+" did not take") {
		t.Fatalf("error %v, want the collector named", err)
	}
	if ec, ok := err.(interface{ ExitCode() int }); ok && ec.ExitCode() != 1 {
		t.Errorf("exit status %d, want 1", ec.ExitCode())
	}
	if !strings.Contains(stdout, `"type":"requestFinished"`) {
		t.Error("the events were not printed")
	}
}

func TestOTLPUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--local", "--otlp", "127.0.0.1:4317"}, "--otlp sends the traces --raw prints, or a saved trace: add --raw, or -f FILE"},
		{[]string{"-f", "x", "--otlp-protocol", "http"}, "--otlp-protocol applies to --otlp: add --otlp ENDPOINT"},
		{[]string{"-f", "x", "--otlp", "127.0.0.1:4317", "--otlp-protocol", "thrift"}, `--otlp: OTLP protocol "thrift": want grpc or http`},
		{[]string{"-f", "x", "--otlp", "ftp://c:1"}, `--otlp: OTLP endpoint "ftp://c:1": scheme "ftp", want http or https`},
		{[]string{"-f", "x", "--otlp", "c:1", "--otlp-header", "token"}, `--otlp-header "token": want NAME=VALUE`},
	} {
		_, err := execute(t, "", c.args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
			continue
		}
		if ec, ok := err.(interface{ ExitCode() int }); !ok || ec.ExitCode() != 2 {
			t.Errorf("%q: not a usage error (exit 2)", c.args)
		}
	}
}
