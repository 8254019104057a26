// Package ssetest writes long trace captures for benchmarks and for
// measuring gwdiag by hand (gencapture): many copies of one trace of the
// real proxy, each valid, as `gwdiag trace --follow --raw` or `>>` saves
// them.
package ssetest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// templateFile is the trace every capture repeats: the twelve events of one
// request in a cluster, from the real proxy's docs (testdata/agentgateway).
func templateFile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "agentgateway", "k8s-12x.docs.jsonl")
}

// Template is the lines of TemplateFile.
func Template() ([]string, error) {
	b, err := os.ReadFile(templateFile())
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n"), nil
}

// Options say what capture Write writes.
type Options struct {
	// Events is the capture's length in events, rounded up to whole traces.
	Events int
	// IDs gives each trace a requestId, as a followed capture has.
	IDs bool
	// IDBase is added to the traces' numbers to make their ids: captures
	// of two runs have different ids.
	IDBase int
	// Change, when set, is applied to each line of the trace numbered
	// ChangeTrace (1-based): one changed trace in a long capture.
	Change      func(line string) string
	ChangeTrace int
}

// Write writes a capture of copies of the template trace to w and returns
// how many traces it holds.
func Write(w io.Writer, o Options) (int, error) {
	lines, err := Template()
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	n := (o.Events + len(lines) - 1) / len(lines)
	for i := 1; i <= n; i++ {
		for _, l := range lines {
			if o.IDs {
				l = fmt.Sprintf(`{"requestId":"%016x",%s`, i+o.IDBase, l[1:])
			}
			if o.Change != nil && i == o.ChangeTrace {
				l = o.Change(l)
			}
			bw.WriteString(l)
			bw.WriteByte('\n')
		}
	}
	return n, bw.Flush()
}

// WriteFile is Write to a new file at path.
func WriteFile(path string, o Options) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := Write(f, o)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// benchSizes are the capture lengths, in events, benchmarks measure.
var benchSizes = []int{1_000, 100_000, 1_000_000}

// Bench runs one sub-benchmark per benchSizes length: it writes a capture
// of that length (with o's other options) to a temp file, calls run on it
// (with the sub-benchmark, which may stop its timer for a set-up, and the
// length) b.N times, and reports the time and the bytes allocated per
// event.
func Bench(b *testing.B, o Options, run func(b *testing.B, path string, events int) error) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			o := o
			o.Events = n
			path := filepath.Join(b.TempDir(), "capture.jsonl")
			if _, err := WriteFile(path, o); err != nil {
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				if err := run(b, path, n); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			events := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/events, "B/event")
		})
	}
}

// FollowFile is a follow stream of the reference proxy as it travels on
// the wire (testdata/refproxy): 48 requests, four at a time, of four kinds
// (GET, a JSON POST, 5xx answers, client request ids and cookies), 12
// events each, interleaved; the `: ready` and `: keepalive` comments kept.
func FollowFile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "refproxy", "follow-48.sse")
}

// FollowStream returns FollowFile's stream repeated n times, each copy's
// request ids made its own (suffixed -<copy>), with its count of events
// and of requests. The `: ready` comment stays at the start only.
func FollowStream(n int) (stream []byte, events, requests int, err error) {
	b, err := os.ReadFile(FollowFile())
	if err != nil {
		return nil, 0, 0, err
	}
	body, ok := strings.CutPrefix(string(b), ": ready\n\n")
	if !ok {
		return nil, 0, 0, fmt.Errorf("%s does not start with a ready comment", FollowFile())
	}
	id := regexp.MustCompile(`"requestId":"([^"]*)"`)
	stream = []byte(": ready\n\n")
	for i := range n {
		stream = append(stream, id.ReplaceAllString(body, fmt.Sprintf(`"requestId":"${1}-%d"`, i))...)
	}
	events = n * strings.Count(body, "\ndata: ")
	if strings.HasPrefix(body, "data: ") {
		events += n
	}
	return stream, events, n * strings.Count(body, `"type":"requestFinished"`), nil
}
