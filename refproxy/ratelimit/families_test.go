package ratelimit

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/valyala/fasthttp"
)

// written is what WriteFamilies writes, as a response's header.
func written(d Decision, now time.Time, upstream http.Header) http.Header {
	h := upstream.Clone()
	if h == nil {
		h = http.Header{}
	}
	var peek func(string) string
	if upstream != nil {
		peek = h.Get
	}
	d.WriteFamilies(now, peek, func(k string, v []byte) { h.Set(k, string(v)) }, func(k string, v []byte) { h.Add(k, string(v)) })
	return h
}

// TestWriteFamilies: each family's fields, names and formats, for a
// route with a request limit (a burst: its ceiling comes back in several
// refills) and a token limit.
func TestWriteFamilies(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 2, 3, 400_000_000, time.UTC)
	reqs := NewBucket(Spec{MaxTokens: 6, TokensPerFill: 3, FillInterval: time.Second})
	toks := NewBucket(Spec{MaxTokens: 1000, TokensPerFill: 1000, FillInterval: time.Minute, Type: Tokens})
	s := newSet(reqs, toks)
	for range 5 {
		s.Admit(at(0))
	}
	s.Charge(at(0), 400)
	d := s.Admit(at(250 * time.Millisecond)) // the 6th request: 0 left of 6
	if !d.Allowed {
		t.Fatalf("the 6th request was refused: %+v", d)
	}
	all, err := ParseFamilies([]string{"anthropic", "ietf", "xRateLimit", "openai"})
	if err != nil {
		t.Fatal(err)
	}
	d.Families = all
	h := written(d, now, nil)
	want := map[string]string{
		"X-Ratelimit-Limit":     "6",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "0", // 750ms: whole seconds, truncated
		"Ratelimit-Policy":      `"requests";q=6;w=1, "tokens";q=1000;qu="tokens";w=60`,
		"Ratelimit":             `"requests";r=0;t=0, "tokens";r=600;t=59`,
		// 6 missing at 3 a refill: two refills, 750ms and 1.75s away.
		"X-Ratelimit-Limit-Requests":             "6",
		"X-Ratelimit-Remaining-Requests":         "0",
		"X-Ratelimit-Reset-Requests":             "1.75s",
		"X-Ratelimit-Limit-Tokens":               "1000",
		"X-Ratelimit-Remaining-Tokens":           "600",
		"X-Ratelimit-Reset-Tokens":               "59.75s",
		"Anthropic-Ratelimit-Requests-Limit":     "6",
		"Anthropic-Ratelimit-Requests-Remaining": "0",
		"Anthropic-Ratelimit-Requests-Reset":     "2026-11-30T01:02:06Z", // 03.4 + 1.75 = 05.15, rounded up
		"Anthropic-Ratelimit-Tokens-Limit":       "1000",
		"Anthropic-Ratelimit-Tokens-Remaining":   "600",
		"Anthropic-Ratelimit-Tokens-Reset":       "2026-11-30T01:03:04Z",
	}
	for name, v := range want {
		if got := strings.Join(h.Values(name), " | "); got != v {
			t.Errorf("%s: got %q, want %q", name, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("wrote %d fields, want %d: %v", len(h), len(want), h)
	}
	// The structured fields parse as the lists they claim to be.
	for _, name := range []string{headerPolicy, headerRateLimit} {
		if _, err := httpsfv.UnmarshalList(h.Values(name)); err != nil {
			t.Errorf("%s %q does not parse as a structured List: %v", name, h.Values(name), err)
		}
	}
	// Without families, x-ratelimit-* alone, as before them.
	d.Families = 0
	if h := written(d, now, nil); len(h) != 3 || h.Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("default families wrote %v, want x-ratelimit-* alone", h)
	}
}

// TestWriteFamiliesKeepsStricterUpstream: a backend's own rate-limit
// headers that say fewer remaining stay as it sent them; ones that say
// more are replaced; the IETF fields are added beside the backend's.
func TestWriteFamiliesKeepsStricterUpstream(t *testing.T) {
	b := NewBucket(Spec{MaxTokens: 10, TokensPerFill: 10, FillInterval: time.Minute})
	d := newSet(b).Admit(at(0)) // 9 left
	d.Families, _ = ParseFamilies([]string{"xRateLimit", "openai", "ietf"})
	upstream := http.Header{
		"X-Ratelimit-Limit":              {"100"},
		"X-Ratelimit-Remaining":          {"3"},
		"X-Ratelimit-Reset":              {"7"},
		"X-Ratelimit-Limit-Requests":     {"500"},
		"X-Ratelimit-Remaining-Requests": {"499"},
		"X-Ratelimit-Reset-Requests":     {"120ms"},
		"Ratelimit-Policy":               {`"upstream";q=500;w=60`},
		"Ratelimit":                      {`"upstream";r=499;t=1`},
	}
	h := written(d, time.Now(), upstream)
	for name, v := range map[string]string{
		"X-Ratelimit-Limit":              "100", // the backend's 3 left is stricter than our 9
		"X-Ratelimit-Remaining":          "3",
		"X-Ratelimit-Reset":              "7",
		"X-Ratelimit-Limit-Requests":     "10", // our 9 is stricter than its 499
		"X-Ratelimit-Remaining-Requests": "9",
		"X-Ratelimit-Reset-Requests":     "1m0s",
		"Ratelimit-Policy":               `"upstream";q=500;w=60 | "requests";q=10;w=60`,
		"Ratelimit":                      `"upstream";r=499;t=1 | "requests";r=9;t=60`,
	} {
		if got := strings.Join(h.Values(name), " | "); got != v {
			t.Errorf("%s: got %q, want %q", name, got, v)
		}
	}
}

func TestParseFamilies(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{}, "at least one"},
		{[]string{"ietf", "IETF"}, `unknown header family "IETF"`},
		{[]string{"openai", "openai"}, `"openai" is listed twice`},
	} {
		if _, err := ParseFamilies(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFamilies(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	s, err := ParseFamilies([]string{"openai"})
	if err != nil || s.Has(familyXRateLimit) || !s.Has(familyOpenAI) {
		t.Errorf("ParseFamilies([openai]) = %b, %v: want openai alone", s, err)
	}
	if !FamilySet(0).Has(familyXRateLimit) || FamilySet(0).Has(familyIETF) {
		t.Error("the zero set is not x-ratelimit-* alone")
	}
}

// BenchmarkWriteFamilies: a response's rate-limit headers, x-ratelimit-*
// alone (the default, what every limited response pays) and all four
// families (a route that asks for them).
func BenchmarkWriteFamilies(b *testing.B) {
	reqs := NewBucket(Spec{MaxTokens: 1 << 62, TokensPerFill: 1 << 62, FillInterval: time.Minute})
	toks := NewBucket(Spec{MaxTokens: 1000, TokensPerFill: 1000, FillInterval: time.Hour, Type: Tokens})
	d := newSet(reqs, toks).Admit(time.Now())
	all, _ := ParseFamilies([]string{"xRateLimit", "ietf", "openai", "anthropic"})
	now := time.Now()
	for _, c := range []struct {
		name string
		fams FamilySet
	}{{"x-ratelimit", 0}, {"all four", all}} {
		b.Run(c.name, func(b *testing.B) {
			d.Families = c.fams
			var h fasthttp.ResponseHeader
			b.ReportAllocs()
			for b.Loop() {
				d.WriteFamilies(now, nil, h.SetBytesV, h.SetBytesV)
			}
		})
	}
}

// ietfBySFV is RateLimit-Policy (policy) or RateLimit for d as
// github.com/dunglas/httpsfv serializes it: the items and parameters
// appendIETF writes, built with the library, the oracle of its bytes.
func ietfBySFV(d *Decision, policy bool) (string, error) {
	var l httpsfv.List
	for _, k := range [...]Kind{Requests, Tokens} {
		w := d.window(k)
		if !w.Set {
			continue
		}
		it := httpsfv.NewItem(string(k))
		if policy {
			it.Params.Add("q", clampInt(w.Limit))
			if k == Tokens {
				it.Params.Add("qu", "tokens")
			}
			it.Params.Add("w", int64(w.Period/time.Second))
		} else {
			it.Params.Add("r", clampInt(w.Remaining))
			it.Params.Add("t", int64(w.Reset/time.Second))
		}
		l = append(l, it)
	}
	return httpsfv.Marshal(l)
}

// checkIETF fails unless appendIETF writes d's fields as httpsfv does.
func checkIETF(t *testing.T, d *Decision) {
	t.Helper()
	for _, policy := range []bool{true, false} {
		want, err := ietfBySFV(d, policy)
		if err != nil {
			t.Fatalf("httpsfv cannot write %+v (policy %v): %v", *d, policy, err)
		}
		if got := string(d.appendIETF(nil, policy)); got != want {
			t.Errorf("policy %v of %+v:\n got %s\nwant %s (httpsfv)", policy, *d, got, want)
		}
	}
}

// TestIETFFieldsAsHTTPSFVWrites: the IETF fields, written by hand so that
// a response's headers cost no allocation, are byte for byte what the
// structured-field library writes: one kind of limit or both, zeros, the
// largest counts (clamped to 15 digits), the longest and negative
// durations.
func TestIETFFieldsAsHTTPSFVWrites(t *testing.T) {
	const maxDur = time.Duration(1<<63 - 1)
	for _, c := range []struct{ reqs, toks Window }{
		{reqs: Window{Set: true, Limit: 10, Period: time.Minute, Remaining: 9, Reset: 42 * time.Second}},
		{toks: Window{Set: true, Limit: 1000, Period: time.Hour, Remaining: 600, Reset: 59750 * time.Millisecond}},
		{reqs: Window{Set: true, Limit: 6, Period: time.Second}, toks: Window{Set: true, Limit: 1000, Period: time.Minute, Remaining: 1000}},
		{reqs: Window{Set: true}, toks: Window{Set: true}},
		{reqs: Window{Set: true, Limit: 1<<64 - 1, Period: maxDur, Remaining: 1<<64 - 1, Reset: maxDur},
			toks: Window{Set: true, Limit: 999_999_999_999_999, Period: maxDur, Remaining: 1_000_000_000_000_000, Reset: -maxDur}},
		{reqs: Window{Set: true, Limit: 1, Period: 500 * time.Millisecond, Reset: -time.Second}},
	} {
		d := Decision{Limited: true, Requests: c.reqs, Tokens: c.toks}
		checkIETF(t, &d)
	}
	// A sabotaged writer is caught: the check can fail.
	d := Decision{Limited: true, Requests: Window{Set: true, Limit: 10, Period: time.Minute}}
	want, _ := ietfBySFV(&d, true)
	if got := string(d.appendIETF(nil, true)); strings.Replace(got, ";w=", "; w=", 1) == want {
		t.Fatalf("a space after ';' reads as httpsfv's %q", want)
	}
}

// FuzzIETFFields holds appendIETF to httpsfv over any counts and durations.
func FuzzIETFFields(f *testing.F) {
	f.Add(uint8(3), uint64(10), int64(time.Minute), uint64(9), int64(42*time.Second), uint64(1000), int64(time.Hour), uint64(600), int64(time.Second))
	f.Add(uint8(2), uint64(1<<64-1), int64(1<<63-1), uint64(0), int64(-1<<63), uint64(0), int64(0), uint64(0), int64(0))
	f.Fuzz(func(t *testing.T, which uint8, rl uint64, rp int64, rr uint64, rs int64, tl uint64, tp int64, tr uint64, ts int64) {
		d := Decision{Limited: true,
			Requests: Window{Set: which&1 != 0, Limit: rl, Period: time.Duration(rp), Remaining: rr, Reset: time.Duration(rs)},
			Tokens:   Window{Set: which&2 != 0, Limit: tl, Period: time.Duration(tp), Remaining: tr, Reset: time.Duration(ts)}}
		if !d.Requests.Set && !d.Tokens.Set {
			return
		}
		checkIETF(t, &d)
	})
}

// TestWriteFamiliesAllocations: a response's rate-limit headers, in any
// family, and a 429's Retry-After allocate nothing (httpsfv made 27
// allocations of the IETF fields, strconv one of each count over 99).
func TestWriteFamiliesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates, and sync.Pool drops buffers under it")
	}
	reqs := NewBucket(Spec{MaxTokens: 1 << 40, TokensPerFill: 1 << 40, FillInterval: time.Minute})
	toks := NewBucket(Spec{MaxTokens: 1000, TokensPerFill: 1000, FillInterval: time.Hour, Type: Tokens})
	d := newSet(reqs, toks).Admit(time.Now())
	now := time.Now()
	var h fasthttp.ResponseHeader
	for _, f := range families {
		d.Families, _ = ParseFamilies([]string{string(f)})
		got := testing.AllocsPerRun(100, func() {
			h.Reset()
			d.WriteFamilies(now, nil, h.SetBytesV, h.AddBytesV)
			d.RetryAfter(h.SetBytesV)
		})
		if got != 0 {
			t.Errorf("%s: %v allocations per response, want 0", f, got)
		}
		if h.Len() < 3 {
			t.Errorf("%s: wrote %d headers, want its family's", f, h.Len())
		}
	}
}
