package remote

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"time"

	"cel.dev/cel-go/cel"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

// fakeService records requests and answers with answer (or after delay).
type fakeService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu     sync.Mutex
	got    []*rlsv3.RateLimitRequest
	answer *rlsv3.RateLimitResponse
	delay  time.Duration
}

func (f *fakeService) ShouldRateLimit(ctx context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	f.mu.Lock()
	f.got = append(f.got, r)
	f.mu.Unlock()
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return f.answer, nil
}

func serve(t *testing.T, f *fakeService) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, f)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func limiter(t *testing.T, addr string, p Policy) *Limiter {
	t.Helper()
	conn, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p.Addr = addr
	l, err := New(conn, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var act = map[string]any{
	"request": map[string]any{"path": "/v1/chat", "headers": map[string]any{"x-user": "ann"}},
	"source":  map[string]any{"address": "127.0.0.7", "port": int64(5000)},
}

func status(code rlsv3.RateLimitResponse_Code, limit, remaining uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, LimitRemaining: remaining, DurationUntilReset: durationpb.New(reset),
		CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: limit, Unit: unit}}
}

// TestCheckSendsDescriptors: entries are evaluated from the request; a
// descriptor whose expression fails (a missing header) is skipped under
// failOpen (TestNoDescriptorNoCall has failClosed); request
// descriptors take the request's hit, token ones are sent with 0; the
// headers come from the most constrained status, with every window.
func TestCheckSendsDescriptors(t *testing.T) {
	f := &fakeService{answer: &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		status(rlsv3.RateLimitResponse_OK, 10, 7, rlsv3.RateLimitResponse_RateLimit_MINUTE, 42*time.Second),
		status(rlsv3.RateLimitResponse_OK, 1000, 3, rlsv3.RateLimitResponse_RateLimit_HOUR, 1800*time.Second),
	}}}
	l := limiter(t, serve(t, f), Policy{Domain: "d", Descriptors: []Descriptor{
		{Entries: []Entry{{"user", `request.headers["x-user"]`}, {"ip", "source.address"}}},
		{Entries: []Entry{{"team", `request.headers["x-team"]`}}},
		{Entries: []Entry{{"path", "request.path"}}, Tokens: true},
	}, FailureMode: FailOpen})
	v := l.Check(context.Background(), act)
	if v.Outcome != Allowed || v.Err != nil {
		t.Fatalf("outcome %v, %v; want allowed", v.Outcome, v.Err)
	}
	r := f.got[0]
	var got []string
	for _, d := range r.Descriptors {
		var es []string
		for _, e := range d.Entries {
			es = append(es, e.Key+"="+e.Value)
		}
		hits := "request's"
		if d.HitsAddend != nil {
			hits = strconv.FormatUint(d.HitsAddend.Value, 10)
		}
		got = append(got, strings.Join(es, ",")+" hits "+hits)
	}
	want := []string{"user=ann,ip=127.0.0.7 hits request's", "path=/v1/chat hits 0"}
	if r.Domain != "d" || r.HitsAddend != 1 || strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("request domain %q hits %d descriptors %q; want d, 1, %q", r.Domain, r.HitsAddend, got, want)
	}
	d := v.Decision
	if !d.Limited || d.LimitHeader != "1000, 10;w=60, 1000;w=3600" || d.Remaining != 3 || d.Reset != 1800*time.Second {
		t.Errorf("decision %+v; want limit header \"1000, 10;w=60, 1000;w=3600\", remaining 3, reset 30m", d)
	}
	// The tokens budget has 3 left: Charge sends the usage for it alone.
	if err := l.Charge(context.Background(), &v, 39); err != nil {
		t.Fatal(err)
	}
	c := f.got[1]
	if len(c.Descriptors) != 1 || c.Descriptors[0].HitsAddend.GetValue() != 39 || c.Descriptors[0].Entries[0].Value != "/v1/chat" {
		t.Errorf("charge sent %v; want the path descriptor with hits 39", c.Descriptors)
	}
}

// TestCheckRefusesAnEmptyTokenBudget: a token descriptor with nothing
// left refuses, though the service (asked with 0 hits) said OK.
func TestCheckRefusesAnEmptyTokenBudget(t *testing.T) {
	f := &fakeService{answer: &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		status(rlsv3.RateLimitResponse_OK, 100, 0, rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Second),
	}}}
	l := limiter(t, serve(t, f), Policy{Domain: "d", Descriptors: []Descriptor{{Entries: []Entry{{"k", `"v"`}}, Tokens: true}}})
	if v := l.Check(context.Background(), act); v.Outcome != OverLimit {
		t.Errorf("outcome %v; want over limit", v.Outcome)
	}
}

// TestCheckFailsBounded: a service that does not answer in time, or is
// not there, fails the check within the timeout, saying which service.
func TestCheckFailsBounded(t *testing.T) {
	slow := serve(t, &fakeService{delay: time.Minute, answer: &rlsv3.RateLimitResponse{}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	for name, addr := range map[string]string{"slow": slow, "gone": gone} {
		t.Run(name, func(t *testing.T) {
			l := limiter(t, addr, Policy{Domain: "d", Timeout: 200 * time.Millisecond, Descriptors: []Descriptor{{Entries: []Entry{{"k", `"v"`}}}}})
			began := time.Now()
			v := l.Check(context.Background(), act)
			if v.Outcome != Failed || v.Err == nil || !strings.Contains(v.Err.Error(), addr) {
				t.Errorf("outcome %v, %v; want failed, naming %s", v.Outcome, v.Err, addr)
			}
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("failing took %v with a 200ms timeout", d)
			}
		})
	}
}

// slowListener hands the server each connection only after delay: the
// client's TCP handshake is done (the kernel's backlog), but the server's
// HTTP/2 preface comes late, as from a service starved of CPU.
type slowListener struct {
	net.Listener
	delay time.Duration
}

func (l slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		time.Sleep(l.delay)
	}
	return c, err
}

// TestCheckWaitsForASlowHandshake: a service whose preface comes after
// 1.5 s still answers a check whose policy allows 10 s. A connection
// attempt cut at 1 s (as refproxy's was) failed it.
func TestCheckWaitsForASlowHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, &fakeService{answer: &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}})
	go s.Serve(slowListener{Listener: ln, delay: 1500 * time.Millisecond})
	t.Cleanup(s.Stop)
	addr := ln.Addr().String()
	l := limiter(t, addr, Policy{Domain: "d", Timeout: 10 * time.Second, Descriptors: []Descriptor{{Entries: []Entry{{"k", `"v"`}}}}})
	if v := l.Check(context.Background(), act); v.Outcome != Allowed || v.Err != nil {
		t.Fatalf("outcome %v, %v; want allowed once the service's preface came", v.Outcome, v.Err)
	}
}

// TestNoDescriptorNoCall: when no descriptor applies, the service is not
// asked and nothing is limited.
// TestNoDescriptorNoCall: a descriptor that cannot be evaluated (a
// header the request lacks) is not sent; under failOpen the request is
// allowed with the descriptor named as skipped, under failClosed (the
// default) the check fails, naming it (the reference lets it through
// even then: its issue 3523).
func TestNoDescriptorNoCall(t *testing.T) {
	f := &fakeService{answer: &rlsv3.RateLimitResponse{}}
	descs := []Descriptor{{Entries: []Entry{{"team", `request.headers["x-team"]`}}}}
	open := limiter(t, serve(t, f), Policy{Domain: "d", Descriptors: descs, FailureMode: FailOpen})
	if v := open.Check(context.Background(), act); v.Outcome != Allowed || v.Decision.Limited || len(v.Skipped) != 1 || len(f.got) != 0 {
		t.Errorf("failOpen: outcome %v, decision %+v, skipped %v, %d calls; want allowed, no headers, one skipped, no call", v.Outcome, v.Decision, v.Skipped, len(f.got))
	}
	closed := limiter(t, serve(t, f), Policy{Domain: "d", Descriptors: descs})
	v := closed.Check(context.Background(), act)
	if v.Outcome != Failed || v.Err == nil || !strings.Contains(v.Err.Error(), `descriptor 0 cannot be evaluated: entry "team"`) || len(f.got) != 0 {
		t.Errorf("failClosed: outcome %v, err %v, %d calls; want failed, naming descriptor 0's entry, no call", v.Outcome, v.Err, len(f.got))
	}
}

// TestExpensiveExpressionIsCutOff: an expression whose evaluation would
// run away is stopped by the cost limit, and its descriptor skipped.
func TestExpensiveExpressionIsCutOff(t *testing.T) {
	prog, err := Compile(`[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, a+b+c+d)))).size() > 0 ? "x" : "y"`)
	if err != nil {
		t.Fatal(err)
	}
	c := compiled{keys: []string{"k"}, values: []cel.Program{prog}}
	if rd, err := c.eval(act); err == nil {
		t.Errorf("a 10^4-step expression evaluated to %v; want it cut off", rd)
	}
}

func TestCompileRejects(t *testing.T) {
	for _, expr := range []string{"request.path ==", "[1, 2]", "{'a': 1}", "nosuch.var"} {
		if _, err := Compile(expr); err == nil {
			t.Errorf("Compile(%q): no error", expr)
		}
	}
}

// TestScalarDescriptorValues: a bool or number is sent as its text, as a
// descriptor such as has(jwt.sub) (the reference's docs) needs; jwt holds
// no claims in refproxy.
func TestScalarDescriptorValues(t *testing.T) {
	act := map[string]any{"request": map[string]any{"path": "/a"}, "source": map[string]any{"port": int64(7)}, "jwt": map[string]any{}}
	for expr, want := range map[string]string{
		`has(jwt.sub)`:          "false",
		`1 + 1`:                 "2",
		`source.port`:           "7",
		`request.path == "/a"`:  "true",
		`double(3) / double(2)`: "1.5",
	} {
		prog, err := Compile(expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		c := compiled{keys: []string{"k"}, values: []cel.Program{prog}}
		rd, err := c.eval(act)
		if err != nil || rd.Entries[0].Value != want {
			t.Errorf("%s: got %v (%v), want %q", expr, rd, err, want)
		}
	}
}

// TestDecisionOfTheDenyingDescriptor: of several descriptors, a 429's
// headers are those of the one over its limit, not of one that passed
// with as few (0) remaining and another reset.
func TestDecisionOfTheDenyingDescriptor(t *testing.T) {
	status := func(code rlsv3.RateLimitResponse_Code, perUnit, remaining uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, LimitRemaining: remaining,
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: perUnit, Unit: unit},
			DurationUntilReset: durationpb.New(reset)}
	}
	d := decision([]*rlsv3.RateLimitResponse_DescriptorStatus{
		status(rlsv3.RateLimitResponse_OK, 10, 0, rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second),
		status(rlsv3.RateLimitResponse_OVER_LIMIT, 2, 0, rlsv3.RateLimitResponse_RateLimit_MINUTE, 40*time.Second),
		status(rlsv3.RateLimitResponse_OK, 1000, 500, rlsv3.RateLimitResponse_RateLimit_HOUR, 30*time.Minute),
	}, []*ratelimitv3.RateLimitDescriptor{{}, {}, {HitsAddend: wrapperspb.UInt64(0)}})
	if d.Limit != 2 || d.Remaining != 0 || d.Reset != 40*time.Second {
		t.Errorf("decision = %+v, want the over-limit descriptor's limit 2, remaining 0, reset 40s", d)
	}
	// Several denied: the one that resets last, wherever it stands (the
	// request passes only then).
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		over := []*rlsv3.RateLimitResponse_DescriptorStatus{
			status(rlsv3.RateLimitResponse_OVER_LIMIT, 2, 0, rlsv3.RateLimitResponse_RateLimit_HOUR, 20*time.Minute),
			status(rlsv3.RateLimitResponse_OVER_LIMIT, 5, 0, rlsv3.RateLimitResponse_RateLimit_DAY, 5*time.Hour),
		}
		got := decision([]*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OK, 10, 0, rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second),
			over[order[0]], over[order[1]]}, nil)
		if got.Limit != 5 || got.Reset != 5*time.Hour || !got.Requests.Refused || got.Requests.Reset != 5*time.Hour {
			t.Errorf("two denied, in order %v: decision = %+v, want the day's limit 5 and reset 5h", order, got)
		}
		if want := "5, 10;w=1, 2;w=3600, 5;w=86400"; order[0] == 0 && got.LimitHeader != want {
			t.Errorf("x-ratelimit-limit %q, want %q", got.LimitHeader, want)
		}
	}
	// Each kind apart, for the header families that describe both.
	wantReq := ratelimit.Window{Set: true, Limit: 2, Period: time.Minute, Remaining: 0, Reset: 40 * time.Second, Full: 40 * time.Second, Refused: true}
	wantTok := ratelimit.Window{Set: true, Limit: 1000, Period: time.Hour, Remaining: 500, Reset: 30 * time.Minute, Full: 30 * time.Minute}
	if d.Requests != wantReq || d.Tokens != wantTok {
		t.Errorf("windows: requests %+v, tokens %+v; want %+v and %+v", d.Requests, d.Tokens, wantReq, wantTok)
	}
}
