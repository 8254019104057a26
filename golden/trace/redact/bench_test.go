package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// followEvents are the data frames of the recorded follow stream of the
// reference proxy (ssetest.FollowStream: 48 requests of four kinds, one in
// four carrying a cookie), with their headers as a reader reads them.
func followEvents(tb testing.TB) ([][]byte, []trace.Header) {
	tb.Helper()
	stream, _, _, err := ssetest.FollowStream(1)
	if err != nil {
		tb.Fatal(err)
	}
	var evs [][]byte
	var hs []trace.Header
	for _, l := range bytes.Split(stream, []byte("\n")) {
		if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			h, err := trace.ParseHeader(d)
			if err != nil {
				tb.Fatal(err)
			}
			evs, hs = append(evs, d), append(hs, h)
		}
	}
	return evs, hs
}

// withoutCredentials is evs without the cookie one request in four has.
func withoutCredentials(evs [][]byte) [][]byte {
	out := make([][]byte, len(evs))
	for i, e := range evs {
		out[i] = bytes.Replace(e, []byte(`"cookie":"a=b; c=d",`), nil, 1)
	}
	return out
}

// credentialed is evs with an authorization header (a key of its
// request's own) in each request snapshot, as every request to an LLM
// gateway carries one.
func credentialed(evs [][]byte, hs []trace.Header) [][]byte {
	out := make([][]byte, len(evs))
	for i, e := range evs {
		out[i] = bytes.Replace(e, []byte(`"request":{"headers":{`),
			[]byte(`"request":{"headers":{"authorization":"Bearer sk-`+hs[i].RequestID+`",`), 1)
	}
	return out
}

// redactedAsRefproxy is evs redacted, written again as json.Marshal writes
// them (as refproxy sends its events once it redacts: the markers'
// < and > escaped).
func redactedAsRefproxy(tb testing.TB, evs [][]byte) [][]byte {
	r := New(Options{})
	out := make([][]byte, len(evs))
	for i, e := range evs {
		red, _ := r.AppendEvent(nil, e, &Secrets{})
		var v any
		if err := json.Unmarshal(red, &v); err != nil {
			tb.Fatal(err)
		}
		out[i], _ = json.Marshal(v)
	}
	return out
}

// BenchmarkStream redacts the recorded follow stream's events as gwdiag
// trace --follow --raw does (Stream.Parsed: the event itself when nothing
// changes, else a reused buffer):
// the cost the redaction adds to each event a reader passes on. recorded
// is the stream as refproxy sent it (one request in four with a cookie),
// no-credentials without the cookies, credentialed with an authorization
// header in every request, refproxy-redacted that stream as refproxy
// sends it once it redacts (nothing left to redact: markers).
func BenchmarkStream(b *testing.B) {
	evs, hs := followEvents(b)
	for _, c := range []struct {
		name string
		evs  [][]byte
	}{{"recorded", evs}, {"no-credentials", withoutCredentials(evs)}, {"credentialed", credentialed(evs, hs)},
		{"refproxy-redacted", redactedAsRefproxy(b, credentialed(evs, hs))}} {
		b.Run(c.name, func(b *testing.B) {
			size := 0
			for _, e := range c.evs {
				size += len(e)
			}
			r := New(Options{Key: testKey})
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = redactAll(NewStream(r), c.evs, hs, buf)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.evs)), "ns/event")
		})
	}
}

// redactAll redacts evs in order, each into buf; not inlined, so that
// make bench-instr counts it (INSTR_FUNC=redactAll).
//
//go:noinline
func redactAll(st *Stream, evs [][]byte, hs []trace.Header, buf []byte) []byte {
	for i, e := range evs {
		buf, _ = st.Parsed(e, hs[i])
	}
	return buf
}

// BenchmarkCapture redacts captures of ssetest's lengths (JSON Lines of
// the real proxy's trace, request ids), as gwdiag trace redact does:
// the time and the bytes allocated per event, which stay the same from a
// thousand events to a million (TestCaptureStreams checks what is held).
func BenchmarkCapture(b *testing.B) {
	r := New(Options{})
	ssetest.Bench(b, ssetest.Options{IDs: true}, func(_ *testing.B, path string, _ int) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = NewStream(r).Capture(io.Discard, f)
		return err
	})
}
