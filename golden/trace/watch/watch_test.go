package watch

import (
	"math/rand/v2"
	"testing"
)

// TestOutcomeMemoMatchesCEL: a compiled outcome filter answers what plain
// CEL evaluation over its variables answers, for every status from -5 to
// 1100 (remembered or not) and latencies at random, asked twice (the
// second time from memory when the expression reads only the status);
// errors (a missing key, a division by zero) keep nothing either way.
func TestOutcomeMemoMatchesCEL(t *testing.T) {
	exprs := []struct {
		expr     string
		memoised bool
	}{
		{`response.code >= 500`, true},
		{`response.code == 429 || response.code == 503`, true},
		{`response.code in [404, 418, 999]`, true},
		{`string(response.code).startsWith("5")`, true},
		{`response.code / 100 == 4`, true},
		{`response.code % 7 == 3`, true},
		{`[1, 2].exists(x, x + response.code == 501)`, true},
		{`has(response.code) && response.code != 200`, true},
		{`response.missing == 1`, true},           // an error: keeps nothing
		{`100 / (response.code - 500) > 0`, true}, // an error at 500 only
		{`true`, true},
		{`latencyMicros > 500000`, false},
		{`response.code >= 500 || latencyMicros > 1000`, false},
		{`[latencyMicros].all(l, l % 3 == 0) && response.code < 300`, false},
	}
	rng := rand.New(rand.NewPCG(1, 31))
	for _, c := range exprs {
		prg, err := CompileOutcome(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		o := prg.(*outcomeProgram)
		if got := o.byCode != nil; got != c.memoised {
			t.Errorf("%s: remembered per status %v, want %v", c.expr, got, c.memoised)
		}
		for round := range 2 {
			for code := int64(-5); code <= 1100; code++ {
				lat := rng.Int64N(2_000_000)
				want := evalOutcome(o.Program, code, lat)
				if got := OutcomeAccepts(prg, code, lat); got != want {
					t.Fatalf("%s, round %d: code %d, latency %d: got %v, CEL says %v", c.expr, round, code, lat, got, want)
				}
			}
		}
	}
}

// TestOutcomeCheckAllocatesNothing: deciding a trace's outcome by its
// status alone, once the status was seen, allocates nothing.
func TestOutcomeCheckAllocatesNothing(t *testing.T) {
	prg, err := CompileOutcome(`response.code >= 500`)
	if err != nil {
		t.Fatal(err)
	}
	OutcomeAccepts(prg, 200, 10)
	if n := testing.AllocsPerRun(100, func() { OutcomeAccepts(prg, 200, 10) }); n != 0 {
		t.Errorf("allocs per outcome check = %v, want 0", n)
	}
}
