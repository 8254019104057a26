package ratelimit

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/valyala/fasthttp"
)

// t0 is the injected clock's origin; tests move time by adding to it.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func u64(v uint64) *uint64 { return &v }

func TestFromPolicy(t *testing.T) {
	tests := []struct {
		name    string
		in      PolicyEntry
		want    Spec
		wantErr string
	}{
		{"requests with burst", PolicyEntry{Requests: u64(3), Unit: "Seconds", Burst: u64(3)},
			Spec{MaxTokens: 6, TokensPerFill: 3, FillInterval: time.Second, Type: Requests}, ""},
		{"requests per minute", PolicyEntry{Requests: u64(10), Unit: "Minutes"},
			Spec{MaxTokens: 10, TokensPerFill: 10, FillInterval: time.Minute, Type: Requests}, ""},
		{"tokens per hour", PolicyEntry{Tokens: u64(1000), Unit: "Hours"},
			Spec{MaxTokens: 1000, TokensPerFill: 1000, FillInterval: time.Hour, Type: Tokens}, ""},
		{"burst zero", PolicyEntry{Requests: u64(5), Unit: "Seconds", Burst: u64(0)},
			Spec{MaxTokens: 5, TokensPerFill: 5, FillInterval: time.Second, Type: Requests}, ""},
		{"burst on tokens raises the ceiling as in the reference", PolicyEntry{Tokens: u64(100), Unit: "Minutes", Burst: u64(20)},
			Spec{MaxTokens: 120, TokensPerFill: 100, FillInterval: time.Minute, Type: Tokens}, ""},
		{"burst on tokens overflow", PolicyEntry{Tokens: u64(100), Unit: "Minutes", Burst: u64(^uint64(0))}, Spec{}, "burst: tokens + burst overflows"},
		{"both", PolicyEntry{Requests: u64(1), Tokens: u64(1), Unit: "Seconds"}, Spec{}, "requests: exactly one of requests or tokens must be set, got both"},
		{"neither", PolicyEntry{Unit: "Seconds"}, Spec{}, "requests: exactly one of requests or tokens must be set, got neither"},
		{"zero requests", PolicyEntry{Requests: u64(0), Unit: "Seconds"}, Spec{}, "requests: must be >= 1, got 0"},
		{"zero tokens", PolicyEntry{Tokens: u64(0), Unit: "Seconds"}, Spec{}, "tokens: must be >= 1, got 0"},
		{"missing unit", PolicyEntry{Requests: u64(1)}, Spec{}, "unit: is required (Seconds, Minutes or Hours)"},
		{"bad unit", PolicyEntry{Requests: u64(1), Unit: "Days"}, Spec{}, `unit: must be Seconds, Minutes or Hours, got "Days"`},
		{"lowercase unit", PolicyEntry{Requests: u64(1), Unit: "seconds"}, Spec{}, `unit: must be Seconds, Minutes or Hours, got "seconds"`},
		{"overflow", PolicyEntry{Requests: u64(2), Unit: "Seconds", Burst: u64(^uint64(0))}, Spec{}, "burst: requests + burst overflows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromPolicy(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("FromPolicy() error = %v, want prefix %q", err, tt.wantErr)
				}
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("FromPolicy() error %T is not a *FieldError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromPolicy() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromPolicy() mismatch (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("mapped spec does not validate: %v", err)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	ok := Spec{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Second}
	tests := []struct {
		name    string
		mod     func(*Spec)
		wantErr string
	}{
		{"valid default type", func(*Spec) {}, ""},
		{"valid tokens", func(s *Spec) { s.Type = Tokens }, ""},
		{"zero max", func(s *Spec) { s.MaxTokens = 0 }, "maxTokens: must be >= 1"},
		{"zero fill", func(s *Spec) { s.TokensPerFill = 0 }, "tokensPerFill: must be >= 1"},
		{"zero interval", func(s *Spec) { s.FillInterval = 0 }, "fillInterval: must be a positive duration, got 0s"},
		{"bad type", func(s *Spec) { s.Type = "bytes" }, `type: must be "requests" or "tokens", got "bytes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.mod(&s)
			err := s.Validate()
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// step is one call on a Set at an injected time, and what it must decide.
type step struct {
	at        time.Duration
	charge    uint64 // when > 0: Charge instead of Admit
	allowed   bool
	remaining uint64
	reset     time.Duration
}

func runSteps(t *testing.T, s *Set, steps []step) {
	t.Helper()
	for i, st := range steps {
		if st.charge > 0 {
			s.Charge(at(st.at), st.charge)
			continue
		}
		d := s.Admit(at(st.at))
		if d.Allowed != st.allowed || d.Remaining != st.remaining || d.Reset != st.reset || !d.Limited {
			t.Fatalf("step %d at %v: got allowed=%v remaining=%d reset=%v limited=%v, want allowed=%v remaining=%d reset=%v limited=true",
				i, st.at, d.Allowed, d.Remaining, d.Reset, d.Limited, st.allowed, st.remaining, st.reset)
		}
	}
}

func TestRequestsBucket(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		spec  Spec
		steps []step
	}{
		{"burst: 3 per second plus 3 admits 6, the 7th is refused", Spec{MaxTokens: 6, TokensPerFill: 3, FillInterval: time.Second}, []step{
			{at: 0, allowed: true, remaining: 5, reset: time.Second},
			{at: 100 * ms, allowed: true, remaining: 4, reset: 900 * ms},
			{at: 100 * ms, allowed: true, remaining: 3, reset: 900 * ms},
			{at: 100 * ms, allowed: true, remaining: 2, reset: 900 * ms},
			{at: 100 * ms, allowed: true, remaining: 1, reset: 900 * ms},
			{at: 100 * ms, allowed: true, remaining: 0, reset: 900 * ms},
			{at: 999 * ms, allowed: false, remaining: 0, reset: 1 * ms},
			// One discrete fill of 3, not 6, at exactly one interval.
			{at: 1000 * ms, allowed: true, remaining: 2, reset: time.Second},
			{at: 1500 * ms, allowed: true, remaining: 1, reset: 500 * ms},
			{at: 1500 * ms, allowed: true, remaining: 0, reset: 500 * ms},
			{at: 1500 * ms, allowed: false, remaining: 0, reset: 500 * ms},
			// A long idle period fills up to the cap only, keeping the phase.
			{at: 60*time.Second + 250*ms, allowed: true, remaining: 5, reset: 750 * ms},
		}},
		{"several intervals elapsed add several fills", Spec{MaxTokens: 10, TokensPerFill: 2, FillInterval: time.Second}, []step{
			{at: 0, allowed: true, remaining: 9, reset: time.Second},
			{at: 0, allowed: true, remaining: 8, reset: time.Second},
			{at: 0, allowed: true, remaining: 7, reset: time.Second},
			{at: 0, allowed: true, remaining: 6, reset: time.Second},
			{at: 0, allowed: true, remaining: 5, reset: time.Second},
			{at: 2500 * ms, allowed: true, remaining: 8, reset: 500 * ms}, // 5 + 2*2 - 1
		}},
		{"clock going backwards adds nothing", Spec{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Second}, []step{
			{at: 5 * time.Second, allowed: true, remaining: 0, reset: time.Second},
			{at: 0, allowed: false, remaining: 0, reset: 6 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, newSet(NewBucket(tt.spec)), tt.steps)
		})
	}
}

func TestTokensBucket(t *testing.T) {
	tok := func(max, fill uint64, every time.Duration) Spec {
		return Spec{MaxTokens: max, TokensPerFill: fill, FillInterval: every, Type: Tokens}
	}
	tests := []struct {
		name  string
		spec  Spec
		steps []step
	}{
		{"100 per minute with 39-token responses: 200, 200, 200, 429", tok(100, 100, time.Minute), []step{
			{at: 0, allowed: true, remaining: 100, reset: time.Minute}, {at: 0, charge: 39},
			{at: 1 * time.Second, allowed: true, remaining: 61, reset: 59 * time.Second}, {at: 1 * time.Second, charge: 39},
			{at: 2 * time.Second, allowed: true, remaining: 22, reset: 58 * time.Second}, {at: 2 * time.Second, charge: 39},
			{at: 3 * time.Second, allowed: false, remaining: 0, reset: 57 * time.Second},
			// The window refills with no manual action; the overage was not carried.
			{at: 60 * time.Second, allowed: true, remaining: 100, reset: time.Minute},
		}},
		{"overage: 1200 on a 1000 limit succeeds, floors at 0", tok(1000, 1000, time.Minute), []step{
			{at: 0, allowed: true, remaining: 1000, reset: time.Minute}, {at: 0, charge: 1200},
			{at: 0, allowed: false, remaining: 0, reset: time.Minute},
		}},
		{"one token left still admits", tok(10, 10, time.Minute), []step{
			{at: 0, allowed: true, remaining: 10, reset: time.Minute}, {at: 0, charge: 9},
			{at: 0, allowed: true, remaining: 1, reset: time.Minute},
			{at: 0, allowed: true, remaining: 1, reset: time.Minute}, {at: 0, charge: 1},
			{at: 0, allowed: false, remaining: 0, reset: time.Minute},
		}},
		{"a charge after the refill is taken from the new window", tok(100, 100, time.Second), []step{
			{at: 0, allowed: true, remaining: 100, reset: time.Second}, {at: 0, charge: 100},
			{at: 1500 * time.Millisecond, charge: 30},
			{at: 1500 * time.Millisecond, allowed: true, remaining: 70, reset: 500 * time.Millisecond},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, newSet(NewBucket(tt.spec)), tt.steps)
		})
	}
}

func TestInvalidSpecsDoNotPanic(t *testing.T) {
	for _, spec := range []Spec{
		{MaxTokens: 2, TokensPerFill: 0, FillInterval: time.Second},
		{MaxTokens: 2, TokensPerFill: 1, FillInterval: 0},
		{MaxTokens: 0, TokensPerFill: 1, FillInterval: time.Second},
		{MaxTokens: 2, TokensPerFill: 1, FillInterval: -time.Second},
	} {
		s := newSet(NewBucket(spec))
		var got []bool
		for _, d := range []time.Duration{0, 0, 0, 10 * time.Second} {
			got = append(got, s.Admit(at(d)).Allowed)
		}
		want := []bool{spec.MaxTokens > 0, spec.MaxTokens > 1, false, spec.MaxTokens > 0 && spec.TokensPerFill > 0 && spec.FillInterval > 0}
		if !cmp.Equal(got, want) {
			t.Errorf("%+v: admitted %v, want %v", spec, got, want)
		}
	}
}

func TestSetAllOrNothing(t *testing.T) {
	wide := NewBucket(Spec{MaxTokens: 10, TokensPerFill: 10, FillInterval: time.Minute})
	narrow := NewBucket(Spec{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Second})
	s := newSet(wide, narrow)

	d := s.Admit(at(0))
	if !d.Allowed || d.Limit != 1 || d.Remaining != 0 || d.Reset != time.Second {
		t.Fatalf("first Admit = %+v, want allowed with headers of the narrow bucket (limit 1, remaining 0, reset 1s)", d)
	}
	d = s.Admit(at(0))
	if d.Allowed || d.Limit != 1 || d.Remaining != 0 {
		t.Fatalf("second Admit = %+v, want refused with limit 1, remaining 0", d)
	}
	if got := wide.Remaining(at(0)); got != 9 {
		t.Errorf("wide bucket remaining after a refused request = %d, want 9 (a refused request takes nothing)", got)
	}
	// After the narrow bucket refills, both take one; narrow is left with 0.
	d = s.Admit(at(time.Second))
	if !d.Allowed || d.Limit != 1 || d.Remaining != 0 {
		t.Errorf("Admit after refill = %+v, want allowed, limit 1, remaining 0", d)
	}
}

func TestSetHeadersFromMostConstrained(t *testing.T) {
	reqs := NewBucket(Spec{MaxTokens: 5, TokensPerFill: 5, FillInterval: time.Second})
	toks := NewBucket(Spec{MaxTokens: 100, TokensPerFill: 100, FillInterval: time.Minute, Type: Tokens})
	s := newSet(toks, reqs)
	if !s.HasTokens() {
		t.Fatal("HasTokens() = false, want true")
	}
	d := s.Admit(at(0))
	if want := (Decision{Allowed: true, Limit: 5, Remaining: 4, Reset: time.Second, Limited: true,
		Requests: Window{Set: true, Limit: 5, Period: time.Second, Remaining: 4, Reset: time.Second, Full: time.Second},
		Tokens:   Window{Set: true, Limit: 100, Period: time.Minute, Remaining: 100, Reset: time.Minute}}); d != want {
		t.Errorf("Admit = %+v, want %+v", d, want)
	}
	s.Charge(at(0), 98)
	d = s.Admit(at(0))
	if want := (Decision{Allowed: true, Limit: 100, Remaining: 2, Reset: time.Minute, Limited: true,
		Requests: Window{Set: true, Limit: 5, Period: time.Second, Remaining: 3, Reset: time.Second, Full: time.Second},
		Tokens:   Window{Set: true, Limit: 100, Period: time.Minute, Remaining: 2, Reset: time.Minute, Full: time.Minute}}); d != want {
		t.Errorf("Admit after charge = %+v, want %+v (tokens bucket is now the most constrained)", d, want)
	}
	if got := reqs.Remaining(at(0)); got != 3 {
		t.Errorf("requests bucket remaining = %d, want 3 (charge must not touch it)", got)
	}
}

func TestSharedGatewayBucket(t *testing.T) {
	gw := NewBucket(Spec{MaxTokens: 3, TokensPerFill: 3, FillInterval: time.Minute})
	routeA := newSet(gw, NewBucket(Spec{MaxTokens: 10, TokensPerFill: 10, FillInterval: time.Minute}))
	routeB := newSet(gw)
	var got []bool
	for _, s := range []*Set{routeA, routeB, routeA, routeB} {
		got = append(got, s.Admit(at(0)).Allowed)
	}
	if want := []bool{true, true, true, false}; !cmp.Equal(got, want) {
		t.Errorf("admissions across routes sharing a gateway bucket = %v, want %v", got, want)
	}
}

func TestEmptySet(t *testing.T) {
	for name, s := range map[string]*Set{"nil": nil, "empty": newSet(), "nil buckets": newSet(nil, nil)} {
		t.Run(name, func(t *testing.T) {
			d := s.Admit(at(0))
			if !d.Allowed || d.Limited {
				t.Errorf("Admit = %+v, want allowed and not limited", d)
			}
			d.EachHeader(func(k string, v []byte) { t.Errorf("EachHeader gave %s: %s, want nothing", k, v) })
			s.Charge(at(0), 10) // must not panic
			if s.HasTokens() {
				t.Error("HasTokens() = true, want false")
			}
		})
	}
}

func TestEachHeader(t *testing.T) {
	d := Decision{Allowed: false, Limit: 6, Remaining: 0, Reset: 1999 * time.Millisecond, Limited: true}
	got := map[string]string{}
	d.EachHeader(func(k string, v []byte) { got[k] = string(v) })
	want := map[string]string{
		"X-Ratelimit-Limit":     "6",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "1", // whole seconds, truncated
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("EachHeader (-want +got):\n%s", d)
	}
}

func TestConcurrentExactness(t *testing.T) {
	const clients, max = 64, 20
	s := newSet(NewBucket(Spec{MaxTokens: max, TokensPerFill: max, FillInterval: time.Hour}))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for range clients {
		wg.Go(func() {
			for range 10 {
				if s.Admit(time.Now()).Allowed {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if admitted != max {
		t.Errorf("admitted %d of %d concurrent requests, want exactly %d", admitted, clients*10, max)
	}
}

func BenchmarkAdmit(b *testing.B) {
	spec := Spec{MaxTokens: 1 << 62, TokensPerFill: 1 << 62, FillInterval: time.Second}
	cases := []struct {
		name string
		set  *Set
	}{
		{"one bucket", newSet(NewBucket(spec))},
		{"two buckets", newSet(NewBucket(spec), NewBucket(Spec{MaxTokens: 1000, TokensPerFill: 1000, FillInterval: time.Minute, Type: Tokens}))},
	}
	for _, c := range cases {
		now := time.Now()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !c.set.Admit(now).Allowed {
					b.Fatal("refused")
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !c.set.Admit(now).Allowed {
						b.Fatal("refused")
					}
				}
			})
		})
		b.Run(c.name+"/with time.Now", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.set.Admit(time.Now())
			}
		})
	}
}

func BenchmarkEachHeader(b *testing.B) {
	d := Decision{Allowed: true, Limit: 6, Remaining: 5, Reset: 900 * time.Millisecond, Limited: true}
	var h fasthttp.ResponseHeader
	b.ReportAllocs()
	for b.Loop() {
		d.EachHeader(h.SetBytesV)
	}
}

// newSet groups buckets; a nil or empty Set admits everything and sets no headers.
// Nil buckets and repeats of the same bucket are dropped.
func newSet(b ...*Bucket) *Set { return NewKeyedSet(b, nil) }

// TestShadowBucket: a shadow bucket is counted like any other but never
// refuses; with nothing left it stays at 0 (it would have refused, as its
// state says); its headers are written only with ShadowHeaders; beside an
// enforced bucket it leaves the refusing to that one.
func TestShadowBucket(t *testing.T) {
	shadow := NewBucket(Spec{MaxTokens: 2, TokensPerFill: 2, FillInterval: time.Minute, Shadow: true})
	alone := newSet(shadow)
	for i := range 4 {
		d, states := alone.AdmitExplained(at(0))
		wouldRefuse := i >= 2
		if !d.Allowed || d.Limited || states[0].Refused != wouldRefuse || states[0].Remaining != uint64(max(1-i, 0)) {
			t.Errorf("request %d: %+v, state %+v; want allowed, no headers, refused (would have) %v", i+1, d, states[0], wouldRefuse)
		}
	}
	withHeaders := NewBucket(Spec{MaxTokens: 2, TokensPerFill: 2, FillInterval: time.Minute, Shadow: true, ShadowHeaders: true})
	s := newSet(withHeaders)
	s.Admit(at(0))
	s.Admit(at(0))
	if d := s.Admit(at(0)); !d.Allowed || !d.Limited || d.Limit != 2 || d.Remaining != 0 {
		t.Errorf("shadowHeaders, 3rd request: %+v; want allowed with limit 2, remaining 0", d)
	}
	enforced := NewBucket(Spec{MaxTokens: 3, TokensPerFill: 3, FillInterval: time.Minute})
	both := newSet(NewBucket(Spec{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Minute, Shadow: true}), enforced)
	var got []bool
	for range 4 {
		d := both.Admit(at(0))
		got = append(got, d.Allowed)
		if d.Limit != 3 {
			t.Errorf("headers of limit %d, want the enforced limit's 3 (the shadow one writes none)", d.Limit)
		}
	}
	if want := []bool{true, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("beside an enforced limit of 3: allowed %v, want %v", got, want)
	}
}

// TestExplainedStatesAreTheRequestsOwn: a traced request's bucket state is
// the one its own admission left, taken under the bucket's lock, however
// many requests take tokens at once: each allowed request of one bucket
// sees another remaining count (a state read after the lock raced with the
// next request's admission, and two requests could tell the same count).
func TestExplainedStatesAreTheRequestsOwn(t *testing.T) {
	const workers, each = 8, 100
	s := newSet(NewBucket(Spec{MaxTokens: workers * each, TokensPerFill: 1, FillInterval: time.Hour}))
	got := make(chan uint64, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				d, states := s.AdmitExplained(at(0))
				if !d.Allowed || len(states) != 1 {
					t.Errorf("%+v %+v: want allowed, one state", d, states)
					return
				}
				got <- states[0].Remaining
			}
		})
	}
	wg.Wait()
	close(got)
	seen := map[uint64]bool{}
	for r := range got {
		if seen[r] {
			t.Fatalf("two requests were told %d remaining", r)
		}
		seen[r] = true
	}
}
