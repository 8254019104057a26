package proxy

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzQueryParam: on any raw query string, withoutQueryParam drops exactly
// the parameters whose decoded name is name, keeps every other pair byte
// for byte and in order, and queryParam finds the first dropped one (its
// value as sent, and decoded as url.ParseQuery decodes it).
func FuzzQueryParam(f *testing.F) {
	for _, s := range [][2]string{
		{"a=1&api_key=sk-1&b=2", "api_key"}, {"api%5Fkey=x", "api_key"}, {"k=a+b%26c&k=2", "k"},
		{"&&k&=&k=", "k"}, {"k=%zz", "k"}, {"", "k"}, {"a=%2F", "a"}, {"x=1", "y"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, q, name string) {
		out := withoutQueryParam(q, name)
		var kept []string
		var firstDropped string
		dropped := false
		for _, pair := range strings.Split(q, "&") {
			if pair == "" && q == "" {
				continue
			}
			k, v, _ := strings.Cut(pair, "=")
			if dk, err := url.QueryUnescape(k); err == nil && dk == name {
				if !dropped {
					firstDropped, dropped = v, true
				}
				continue
			}
			kept = append(kept, pair)
		}
		if want := strings.Join(kept, "&"); out != want {
			t.Fatalf("withoutQueryParam(%q, %q) = %q, want %q", q, name, out, want)
		}
		raw, decoded, ok := queryParam(q, name)
		if ok != dropped || raw != firstDropped {
			t.Fatalf("queryParam(%q, %q) = %q, %v; want %q, %v", q, name, raw, ok, firstDropped, dropped)
		}
		if ok {
			if dv, err := url.QueryUnescape(raw); err == nil && dv != decoded {
				t.Fatalf("decoded %q, want %q", decoded, dv)
			}
		}
	})
}
