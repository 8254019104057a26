package stepdefs

import (
	"net/http"
	"strings"
	"testing"
)

// TestParseIETF: the IETF fields as the draft defines them parse; each
// form a client of the draft cannot read is an error saying what is wrong.
func TestParseIETF(t *testing.T) {
	fields := func(policy, state string) http.Header {
		h := http.Header{}
		if policy != "" {
			h.Add("RateLimit-Policy", policy)
		}
		if state != "" {
			h.Add("RateLimit", state)
		}
		return h
	}
	ok := fields(`"requests";q=3;w=60, tokens;q=100;qu="tokens";w=3600`, `"requests";r=2;t=58, tokens;r=40`)
	ps, err := parseIETF(ok)
	if err != nil {
		t.Fatal(err)
	}
	want := []ietfPolicy{
		{name: "requests", quota: 3, window: 60, remaining: 2, reset: 58, hasCurrent: true},
		{name: "tokens", quota: 100, unit: "tokens", window: 3600, remaining: 40, reset: -1, hasCurrent: true},
	}
	if len(ps) != len(want) || ps[0] != want[0] || ps[1] != want[1] {
		t.Errorf("parseIETF = %+v, want %+v", ps, want)
	}
	for _, tc := range []struct{ name, policy, state, want string }{
		{"an early draft's Dictionary", `"requests";q=3;w=60`, `limit=3, remaining=2, reset=60`, "is not a structured-field List"},
		{"an inner list", `("a" "b");q=3`, ``, "has an inner list"},
		{"a policy named by a number", `3;q=3`, ``, "named by int64 3, want a Token or a String"},
		{"no quota", `"requests";w=60`, ``, `RateLimit-Policy "requests" has no q`},
		{"a decimal quota", `"requests";q=3.5`, ``, `q is float64 3.5, want an Integer`},
		{"a negative remaining", `"requests";q=3`, `"requests";r=-1`, `r is -1, want at least 0`},
		{"a zero window", `"requests";q=3;w=0`, ``, `w is 0, want at least 1`},
		{"a quota unit not a String", `"requests";q=3;qu=tokens`, ``, `qu is httpsfv.Token, want a String`},
		{"a name given twice", `"requests";q=3, "requests";q=4`, ``, `names "requests" twice`},
		{"state of an unknown policy", `"requests";q=3`, `"other";r=1`, `RateLimit names "other", which RateLimit-Policy does not`},
		{"no remaining", `"requests";q=3`, `"requests";t=1`, `RateLimit "requests" has no r`},
	} {
		_, err := parseIETF(fields(tc.policy, tc.state))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// FuzzParseIETF: any field values give a result or an error, the same
// each time, and a parsed policy has the draft's ranges.
func FuzzParseIETF(f *testing.F) {
	f.Add(`"requests";q=3;w=60, tokens;q=100;qu="tokens";w=3600`, `"requests";r=2;t=58`)
	f.Add(`limit=3`, `remaining=2, reset=60`)
	f.Add(`("a" "b");q=3`, `"a";r=-1`)
	f.Fuzz(func(t *testing.T, policy, state string) {
		h := http.Header{"Ratelimit-Policy": {policy}, "Ratelimit": {state}}
		ps, err := parseIETF(h)
		ps2, err2 := parseIETF(h)
		if (err == nil) != (err2 == nil) || len(ps) != len(ps2) {
			t.Fatalf("two parses differ: %v / %v", err, err2)
		}
		for _, p := range ps {
			if p.quota < 0 || p.window == 0 || p.window < -1 || p.hasCurrent && p.remaining < 0 {
				t.Fatalf("policy out of the draft's ranges: %+v", p)
			}
		}
	})
}
