package routing

import (
	"fmt"
	"testing"
)

// benchBind is a listener of n routes with distinct prefixes, methods and
// a header, the request taking the last one in precedence order.
func benchBind(b *testing.B, n int) *Bind {
	b.Helper()
	var routes []*Route
	for i := range n {
		p := fmt.Sprintf("/svc%04d", i)
		r, err := NewRoute(fmt.Sprintf("default/r%04d", i), i, nil, []MatchSpec{{Path: &PathSpec{PathPrefix: &p}, Method: "POST",
			Headers: []ValueSpec{{Name: "x-tenant", Value: StringSpec{Exact: &p}}}}})
		if err != nil {
			b.Fatal(err)
		}
		routes = append(routes, r)
	}
	root, _ := NewRoute("default/root", n, nil, nil)
	return &Bind{Listeners: []*Listener{NewListener("l", "", append(routes, root))}}
}

// BenchmarkSelect is the data plane's route selection (every request);
// BenchmarkExplain the same with every route's reason (traced requests
// and what-ifs only).
func BenchmarkSelect(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			bind := benchBind(b, n)
			r := &Request{Method: "GET", Path: "/other", Host: "gw"}
			h := headers("x-tenant", "blue")
			b.ReportAllocs()
			for b.Loop() {
				if rt, _ := bind.Select(r, h); rt == nil {
					b.Fatal("no route")
				}
			}
		})
	}
}

func BenchmarkExplain(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			bind := benchBind(b, n)
			r := &Request{Method: "GET", Path: "/other", Host: "gw"}
			h := headers("x-tenant", "blue")
			b.ReportAllocs()
			for b.Loop() {
				if s := bind.Explain(r, h); s.Route == nil || len(s.Verdicts) != n+1 {
					b.Fatal("no route")
				}
			}
		})
	}
}
