package proxy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestDelFold: every field of the name goes, in whatever case each was
// written, and nothing else, on a request and a response as the data
// plane reads them (names not normalised); also past the rounds of one
// name at a time, and for a header fasthttp keeps apart.
func TestDelFold(t *testing.T) {
	for _, n := range []int{0, 1, 3, maxFoldRounds + 4} {
		// n fields named x-abcd, each spelt in another case.
		var names []string
		for i := range n {
			b := []byte("x-abcd")
			for j := range 4 {
				if i&(1<<j) != 0 {
					b[2+j] -= 'a' - 'A'
				}
			}
			names = append(names, string(b))
		}
		t.Run(fmt.Sprintf("%d fields", n), func(t *testing.T) {
			var req fasthttp.RequestHeader
			var resp fasthttp.ResponseHeader
			req.DisableNormalizing()
			resp.DisableNormalizing()
			for _, name := range names {
				req.Add(name, "1")
				resp.Add(name, "1")
			}
			req.Add("x-b", "keep")
			resp.Add("x-b", "keep")
			delFold(&req, "X-ABCD")
			delFold(&resp, "X-ABCD")
			for what, h := range map[string]headers{"request": &req, "response": &resp} {
				var left []string
				for k := range h.All() {
					left = append(left, string(k))
				}
				if slices.ContainsFunc(left, func(k string) bool { return strings.EqualFold(k, "x-abcd") }) || !slices.Contains(left, "x-b") {
					t.Errorf("%s: left %q, want x-b and no x-abcd", what, left)
				}
			}
		})
	}
	// A response always has a Content-Type (fasthttp's default once it is
	// deleted): delFold ends, bounded, with the default.
	var resp fasthttp.ResponseHeader
	resp.DisableNormalizing()
	resp.SetContentType("application/json")
	delFold(&resp, "content-type")
	if got := string(resp.ContentType()); got != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type after delFold: %q, want fasthttp's default", got)
	}
}

// TestSetResponseFold: the field is set once, under the name given,
// whatever case and however many times the backend wrote it; other
// fields stay.
func TestSetResponseFold(t *testing.T) {
	for _, written := range [][]string{nil, {"x-ratelimit-remaining"}, {"X-Ratelimit-Remaining", "X-RATELIMIT-REMAINING"}} {
		var h fasthttp.ResponseHeader
		h.DisableNormalizing()
		for _, name := range written {
			h.Add(name, "499")
		}
		h.Add("x-b", "keep")
		setResponseFold(&h, "x-ratelimit-remaining", []byte("3"))
		var got []string
		for k, v := range h.All() {
			if !strings.EqualFold(string(k), "content-type") {
				got = append(got, string(k)+": "+string(v))
			}
		}
		slices.Sort(got)
		if want := []string{"x-b: keep", "x-ratelimit-remaining: 3"}; !slices.Equal(got, want) {
			t.Errorf("backend wrote %q: fields %q, want %q", written, got, want)
		}
	}
}
