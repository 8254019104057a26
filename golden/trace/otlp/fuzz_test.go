package otlp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/otlp"
)

// FuzzParseTraceparent: a client's traceparent header is hostile input to
// the proxy. Parsing never panics, and what it takes is what the header
// said: written back as version 00, it parses to the same context.
func FuzzParseTraceparent(f *testing.F) {
	for _, s := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", "ff-0-0-0", "", "----", " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sc := otlp.ParseTraceparent(h)
		if !sc.IsValid() {
			return
		}
		if !strings.Contains(strings.ToLower(h), sc.TraceID().String()) || !strings.Contains(h, sc.SpanID().String()) {
			t.Fatalf("%q gave %s %s, not in the header", h, sc.TraceID(), sc.SpanID())
		}
		again := otlp.ParseTraceparent(fmt.Sprintf("00-%s-%s-%02x", sc.TraceID(), sc.SpanID(), byte(sc.TraceFlags())))
		if !again.Equal(sc) {
			t.Fatalf("%q: %+v, written back and parsed %+v", h, sc, again)
		}
	})
}
