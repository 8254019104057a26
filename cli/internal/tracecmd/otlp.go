package tracecmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// otlpFlags send the traces gwdiag reads to an OpenTelemetry collector, each
// as the span tree refproxy exports (golden/trace/otlp, docs/otlp.md): a
// request traced with /debug/trace on a proxy without telemetry lands
// beside the rest in the operator's tracing backend.
type otlpFlags struct {
	endpoint string
	protocol string
	headers  []string
}

func (f *otlpFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.endpoint, "otlp", "", "also send each trace to this OTLP collector as spans (http://host:4317, or host:port); with --raw or -f")
	fs.StringVar(&f.protocol, "otlp-protocol", otlp.GRPC, "OTLP transport: grpc or http (OTLP/HTTP, protobuf, at /v1/traces)")
	fs.StringArrayVar(&f.headers, "otlp-header", nil, "header NAME=VALUE sent with every OTLP export, e.g. a collector's token (repeatable; never printed)")
}

// checkOTLP: --otlp goes with what gwdiag prints as JSON Lines (--raw) or
// reads from a file (-f); its other flags go with it.
func (o *options) checkOTLP(cmd *cobra.Command) error {
	if o.otlp.endpoint == "" {
		for _, name := range []string{"otlp-protocol", "otlp-header"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--%s applies to --otlp: add --otlp ENDPOINT", name)
			}
		}
		return nil
	}
	if !o.raw && o.file == "" {
		return errors.New("--otlp sends the traces --raw prints, or a saved trace: add --raw, or -f FILE")
	}
	_, err := o.otlp.config()
	return err
}

// sink starts the export.
func (f *otlpFlags) sink() (*otlpSink, error) {
	c, err := f.config()
	if err != nil {
		return nil, err
	}
	return newOTLPSink(c)
}

// config is the exporter's config, or a usage error.
func (f *otlpFlags) config() (otlp.Config, error) {
	c := otlp.Config{Endpoint: f.endpoint, Protocol: f.protocol, Service: "gwdiag", Headers: map[string]string{}}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return c, fmt.Errorf("--otlp-header %q: want NAME=VALUE", redactedHeader(h))
		}
		c.Headers[strings.TrimSpace(name)] = value
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("--otlp: %w", err)
	}
	return c, nil
}

// redactedHeader is a NAME=VALUE flag without its value, for messages.
func redactedHeader(h string) string {
	if name, _, ok := strings.Cut(h, "="); ok {
		return name + "=<redacted>"
	}
	return h
}

// maxListedIDs is how many trace ids the summary names.
const maxListedIDs = 5

// otlpSink exports the JSON Lines events written to it, trace by trace:
// what gwdiag prints (redacted) is what it sends. Close waits for the
// collector's answer.
type otlpSink struct {
	exp    *otlp.Exporter
	pw     *io.PipeWriter
	done   chan error
	traces int
	// ids are the first traces' ids, for the summary.
	ids []string
	// now is the zero of a trace whose snapshots give no startTime.
	now func() time.Time
}

func newOTLPSink(c otlp.Config) (*otlpSink, error) {
	exp, err := otlp.New(c)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	s := &otlpSink{exp: exp, pw: pw, done: make(chan error, 1), now: time.Now}
	go func() {
		err := sse.ReadTraces(pr, "the trace", func(ct sse.CapturedTrace) error {
			events := ct.TraceEvents()
			start, ok := otlp.StartTime(events)
			if !ok {
				start = s.now().Add(-time.Duration(events[len(events)-1].EventEnd) * time.Microsecond)
			}
			// The same trace gives the same ids, in every run: a
			// capture sent twice is one trace in the backend.
			var key bytes.Buffer
			for _, c := range ct.Events {
				key.Write(c.Raw)
				key.WriteByte('\n')
			}
			s.traces++
			ids := otlp.DerivedIDs(key.Bytes())
			if len(s.ids) < maxListedIDs {
				s.ids = append(s.ids, ids.Trace.String())
			}
			s.exp.Export(start, ids, otlp.Tree(events))
			return nil
		})
		// What could not be read is left unread: the writer must not block.
		_, _ = io.Copy(io.Discard, pr)
		s.done <- err
	}()
	return s, nil
}

// Write takes JSON Lines of events.
func (s *otlpSink) Write(p []byte) (int, error) { return s.pw.Write(p) }

// Close ends the traces, sends what is queued within a bound, and says how
// many traces went, or why the collector did not take them.
func (s *otlpSink) Close(stderr io.Writer) error {
	_ = s.pw.Close()
	readErr := <-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flushErr := s.exp.Flush(ctx)
	_ = s.exp.Shutdown(ctx)
	failures, last := s.exp.Failures()
	dropped := s.exp.Dropped()
	endpoint := s.exp.Config().Endpoint
	switch {
	case failures > 0:
		return fmt.Errorf("the OTLP collector at %s did not take %d of the batches of %d traces: %s", endpoint, failures, s.traces, last)
	case flushErr != nil:
		return fmt.Errorf("the OTLP collector at %s did not answer within 30s (%d traces): %w", endpoint, s.traces, flushErr)
	case dropped > 0:
		return fmt.Errorf("%d of %d traces not sent to %s: the export queue was full", dropped, s.traces, endpoint)
	}
	more := ""
	if s.traces > len(s.ids) {
		more = fmt.Sprintf(" and %d more", s.traces-len(s.ids))
	}
	fmt.Fprintf(stderr, "exported %s to %s", plural(s.traces, "trace"), endpoint)
	if len(s.ids) > 0 {
		fmt.Fprintf(stderr, ": trace %s%s", strings.Join(s.ids, ", "), more)
	}
	fmt.Fprintln(stderr)
	// Bad lines are the printing path's to report; a bound passed is
	// this path's.
	var bad *sse.CaptureError
	if readErr != nil && !errors.As(readErr, &bad) && !errors.Is(readErr, io.ErrClosedPipe) {
		return readErr
	}
	return nil
}
