// Package jaegersvc runs Jaeger, the tracing backend operators look at
// requests in, for the tests that hold gwdiag's OpenTelemetry spans to what
// such a backend shows (docs/otlp.md): Jaeger's all-in-one program, built
// from its Go module (the pinned tools module steps/jaegersvc/tools; make
// jaeger-bin), its traces kept in memory, its OTLP receiver and query API
// on free loopback ports.
package jaegersvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/freeport"
)

const toolsModule = "steps/jaegersvc/tools"

var program = []toolbin.Program{{Name: "jaeger", Pkg: "github.com/jaegertracing/jaeger/cmd/jaeger"}}

// EnsureBinary returns <repo>/.bin/jaeger, built (static) from the tools
// module when missing or stale; log receives the build's output. A cold
// build takes some five minutes on two cores, a warm one seconds.
func EnsureBinary(ctx context.Context, log io.Writer) (string, error) {
	root, err := toolbin.RepoRoot(toolsModule)
	if err != nil {
		return "", fmt.Errorf("Jaeger is built from a gwdiag checkout (make jaeger-bin): %w", err)
	}
	dir := filepath.Join(root, ".bin")
	if err := toolbin.Build(ctx, root, toolsModule, dir, program, log, toolbin.StaticEnv); err != nil {
		return "", err
	}
	return filepath.Join(dir, program[0].Name), nil
}

// config is Jaeger's: the OTLP receiver (gRPC and HTTP), the memory store,
// the query API; no telemetry of its own.
const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: {{host}}:{{query}}
    grpc:
      endpoint: {{host}}:{{querygrpc}}
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: {{host}}:{{grpc}}
      http:
        endpoint: {{host}}:{{http}}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLP is the OTLP/gRPC receiver (host:port), OTLPHTTP the OTLP/HTTP
	// base URL, Query the query API's and UI's base URL.
	OTLP, OTLPHTTP, Query string

	cmd  *exec.Cmd
	dir  string
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

// readyTimeout bounds Jaeger's start.
const readyTimeout = time.Minute

// Start runs bin on free ports of 127.0.0.1 until Stop.
func Start(ctx context.Context, bin string) (*Jaeger, error) {
	const host = "127.0.0.1"
	ports, err := freeport.Pick(host, 4)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gwdiag-jaeger-")
	if err != nil {
		return nil, err
	}
	cfg := strings.NewReplacer("{{host}}", host, "{{grpc}}", strconv.Itoa(ports[0]), "{{http}}", strconv.Itoa(ports[1]),
		"{{query}}", strconv.Itoa(ports[2]), "{{querygrpc}}", strconv.Itoa(ports[3])).Replace(config)
	path := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	j := &Jaeger{OTLP: host + ":" + strconv.Itoa(ports[0]), OTLPHTTP: "http://" + host + ":" + strconv.Itoa(ports[1]),
		Query: "http://" + host + ":" + strconv.Itoa(ports[2]), dir: dir, done: make(chan struct{})}
	j.cmd = exec.Command(bin, "--config", path)
	j.cmd.Dir = dir
	j.cmd.Env = append(os.Environ(), "OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=none")
	j.cmd.Stdout, j.cmd.Stderr = (*lockedWriter)(j), (*lockedWriter)(j)
	if err := j.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { _ = j.cmd.Wait(); close(j.done) }()
	err = await.Until(ctx, readyTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		select {
		case <-j.done:
			return false, "", fmt.Errorf("jaeger exited at start: %s", j.Output())
		default:
		}
		_, err := j.get(ctx, "/api/services")
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		j.Stop()
		return nil, fmt.Errorf("jaeger did not answer on %s: %w\n%s", j.Query, err, j.Output())
	}
	return j, nil
}

type lockedWriter Jaeger

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out.Len() < 1<<20 {
		w.out.Write(p)
	}
	return len(p), nil
}

// Output is what Jaeger wrote (its first MiB).
func (j *Jaeger) Output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}

// Stop ends Jaeger and removes its files.
func (j *Jaeger) Stop() {
	if j.cmd.Process != nil {
		_ = j.cmd.Process.Kill()
		<-j.done
	}
	os.RemoveAll(j.dir)
}

func (j *Jaeger) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// Span is a span as Jaeger's query API shows it.
type Span struct {
	TraceID, SpanID string
	// ParentSpanID is the span its CHILD_OF reference names, "" for none.
	ParentSpanID string
	Operation    string
	Service      string
	Start        time.Time
	Duration     time.Duration
	Tags         map[string]any
}

// errNoTrace: Jaeger has no trace of the id (yet).
var errNoTrace = errors.New("no such trace")

// Trace is the trace of id (32 hex digits) as Jaeger's API gives it.
func (j *Jaeger) Trace(ctx context.Context, id string) ([]Span, error) {
	b, err := j.get(ctx, "/api/traces/"+id)
	if err != nil {
		if strings.Contains(err.Error(), "404") {
			return nil, errNoTrace
		}
		return nil, err
	}
	var doc struct {
		Data []struct {
			Spans []struct {
				TraceID       string `json:"traceID"`
				SpanID        string `json:"spanID"`
				OperationName string `json:"operationName"`
				References    []struct {
					RefType string `json:"refType"`
					SpanID  string `json:"spanID"`
				} `json:"references"`
				StartTime int64 `json:"startTime"`
				Duration  int64 `json:"duration"`
				Tags      []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
				ProcessID string `json:"processID"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("jaeger's answer for trace %s: %w", id, err)
	}
	var out []Span
	for _, t := range doc.Data {
		for _, s := range t.Spans {
			sp := Span{TraceID: s.TraceID, SpanID: s.SpanID, Operation: s.OperationName, Service: t.Processes[s.ProcessID].ServiceName,
				Start: time.UnixMicro(s.StartTime), Duration: time.Duration(s.Duration) * time.Microsecond, Tags: map[string]any{}}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.ParentSpanID = r.SpanID
				}
			}
			for _, tg := range s.Tags {
				sp.Tags[tg.Key] = tg.Value
			}
			out = append(out, sp)
		}
	}
	return out, nil
}

// WaitTrace waits, up to timeout, until Jaeger shows n spans of trace id.
func (j *Jaeger) WaitTrace(ctx context.Context, id string, n int, timeout time.Duration) ([]Span, error) {
	var spans []Span
	err := await.Until(ctx, timeout, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		s, err := j.Trace(ctx, id)
		if errors.Is(err, errNoTrace) {
			return false, "no trace " + id + " yet", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		spans = s
		return len(s) >= n, fmt.Sprintf("%d of %d spans", len(s), n), nil
	})
	return spans, err
}
