// Package remote is refproxy's client of a global rate-limit service: any
// server of envoy.service.ratelimit.v3.RateLimitService, such as
// github.com/envoyproxy/ratelimit, which shares counters across replicas.
//
// A Limiter is one remoteRateLimit policy: a domain and descriptors whose
// entry values are CEL expressions over the request. Check runs before
// the request is forwarded: request descriptors are charged one hit,
// token descriptors are only looked at (a per-descriptor hits_addend of
// 0), and a token budget with nothing left refuses, as the local limiter
// does. Charge runs after the response, with the tokens its usage
// reports, so the request that crosses the limit succeeds and the next
// ones are refused (spec part 7, token-limit timing rules).
package remote

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

// FailureMode is what a request gets when the service cannot answer.
type FailureMode string

const (
	// FailClosed refuses the request with 500, the reference's default:
	// a budget nobody can check is not spent.
	FailClosed FailureMode = "failClosed"
	// FailOpen lets the request through, as Envoy's rate-limit filter does
	// by default; the trace says the limit was not checked.
	FailOpen FailureMode = "failOpen"
)

// ParseFailureMode accepts the reference's spellings (failClosed,
// FailClosed, failOpen, FailOpen); empty is FailClosed.
func ParseFailureMode(s string) (FailureMode, error) {
	switch s {
	case "", "failClosed", "FailClosed":
		return FailClosed, nil
	case "failOpen", "FailOpen":
		return FailOpen, nil
	}
	return "", fmt.Errorf("unknown failure mode %q (want failClosed or failOpen)", s)
}

// DefaultTimeout bounds one call to the service when the policy sets no
// policies.http.requestTimeout. Envoy's is 20 ms; refproxy allows more for
// a loaded machine, and the data plane still never waits longer.
const DefaultTimeout = time.Second

// Entry is a descriptor entry: a key, and a CEL expression for its value.
type Entry struct {
	Key   string
	Value string
}

// Descriptor is one descriptor sent to the service.
type Descriptor struct {
	Entries []Entry
	// Tokens: the descriptor counts LLM tokens, charged after the
	// response; otherwise it counts requests.
	Tokens bool
	// LimitOverride, when set, is a CEL expression yielding the limit the
	// service applies to this descriptor instead of its own configuration:
	// a map {"unit": "second|minute|hour|day|month|year",
	// "requestsPerUnit": N}.
	LimitOverride string
}

// Policy is one remoteRateLimit policy.
type Policy struct {
	// Addr is the service's host:port (gRPC, plaintext).
	Addr        string
	Domain      string
	Descriptors []Descriptor
	FailureMode FailureMode
	// Timeout bounds each call; 0 is DefaultTimeout.
	Timeout time.Duration
	// SkipUnevaluated skips a descriptor that cannot be evaluated for a
	// request whatever the failure mode, as the reference does (its issue
	// 3523); otherwise failClosed refuses the request.
	SkipUnevaluated bool
}

// Limiter checks and charges one policy's descriptors.
type Limiter struct {
	policy Policy
	client rlsv3.RateLimitServiceClient
	descs  []compiled
	tokens bool
}

type compiled struct {
	keys     []string
	values   []cel.Program
	tokens   bool
	override cel.Program // nil without limitOverride
}

// Compile checks a descriptor value expression; it must yield a string
// (or a bool or number, sent as its string: "true", "42").
func Compile(expression string) (cel.Program, error) {
	return celexpr.CompileRequest(expression, celexpr.Scalar)
}

// CompileOverride checks a limitOverride expression; it must yield a map.
func CompileOverride(expression string) (cel.Program, error) {
	return celexpr.CompileRequest(expression, celexpr.Map)
}

// overrideUnits are the units a limitOverride may name.
var overrideUnits = map[string]typev3.RateLimitUnit{
	"second": typev3.RateLimitUnit_SECOND, "minute": typev3.RateLimitUnit_MINUTE, "hour": typev3.RateLimitUnit_HOUR,
	"day": typev3.RateLimitUnit_DAY, "month": typev3.RateLimitUnit_MONTH, "year": typev3.RateLimitUnit_YEAR,
}

// The descriptor expressions see the request as policies do
// (celexpr.RequestEnv: request.method, .path, .host, .headers, ...,
// source.address and source.port, and jwt, always empty).

// New compiles the policy's expressions; conn reaches the service (see
// Dial).
func New(conn grpc.ClientConnInterface, p Policy) (*Limiter, error) {
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	if p.FailureMode == "" {
		p.FailureMode = FailClosed
	}
	l := &Limiter{policy: p, client: rlsv3.NewRateLimitServiceClient(conn)}
	for i, d := range p.Descriptors {
		c := compiled{tokens: d.Tokens}
		for j, e := range d.Entries {
			prog, err := Compile(e.Value)
			if err != nil {
				return nil, fmt.Errorf("descriptors[%d].entries[%d].value: %w", i, j, err)
			}
			c.keys = append(c.keys, e.Key)
			c.values = append(c.values, prog)
		}
		if d.LimitOverride != "" {
			prog, err := CompileOverride(d.LimitOverride)
			if err != nil {
				return nil, fmt.Errorf("descriptors[%d].limitOverride: %w", i, err)
			}
			c.override = prog
		}
		l.descs = append(l.descs, c)
		l.tokens = l.tokens || d.Tokens
	}
	return l, nil
}

// connectTimeout bounds one attempt to connect to a service, its TCP and
// HTTP/2 handshakes (gRPC's default). It is no bound on a request: each
// check still waits no longer than its policy's timeout. An attempt cut
// shorter than a check's timeout fails that check early: at 1 s, a
// service slow to send its HTTP/2 preface on a loaded machine failed the
// first checks of three proxies starting at once ("error reading server
// preface"), where a longer wait would have had its answer.
const connectTimeout = 20 * time.Second

// Dial opens a lazy plaintext gRPC connection to a service. It redials
// within a second once the service is back, so a limit recovers soon
// after an outage instead of after gRPC's default back-off of minutes.
func Dial(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: connectTimeout,
		}),
	}, extra...)
	return grpc.NewClient("passthrough:///"+addr, opts...)
}

// Policy returns the limiter's policy.
func (l *Limiter) Policy() Policy { return l.policy }

// Tokens reports whether a descriptor counts tokens.
func (l *Limiter) Tokens() bool { return l.tokens }

// Outcome is what a check decided.
type Outcome int

const (
	// Allowed: the service admitted the request, or no descriptor applied.
	Allowed Outcome = iota
	// OverLimit: the service refused it; answer 429.
	OverLimit
	// Failed: the service could not answer; the failure mode decides.
	Failed
)

// descriptorError is a descriptor that could not be evaluated for a
// request. Its cause may quote the request's values (CEL's "no such key:
// <value>"), credentials among them: the request's trace, which scrubs
// them, shows it whole; a log shows only which descriptor (LogValue).
type descriptorError struct {
	Index int
	Err   error
}

func (e *descriptorError) Error() string {
	return fmt.Sprintf("descriptor %d cannot be evaluated: %v", e.Index, e.Err)
}

func (e *descriptorError) Unwrap() error { return e.Err }

// LogValue is the error as a log writes it: without its cause.
func (e *descriptorError) LogValue() slog.Value {
	return slog.StringValue(fmt.Sprintf("descriptor %d cannot be evaluated (why: in the request's trace)", e.Index))
}

// Verdict is the result of Check.
type Verdict struct {
	Outcome Outcome
	// Err says why the service could not answer, or a descriptor could
	// not be evaluated under failClosed (Failed).
	Err error
	// Skipped are the descriptors that could not be evaluated under
	// failOpen: their limits were not checked.
	Skipped []error
	// Decision is for the x-ratelimit-* headers: the most constrained
	// descriptor's limit, remaining and reset, with its window.
	Decision ratelimit.Decision
	// charge holds the token descriptors the request matched, with their
	// values, for Charge after the response.
	charge []*ratelimitv3.RateLimitDescriptor
	// sent and statuses are the descriptors asked about and the service's
	// answer for each, kept (not copied) for Sent.
	sent     []*ratelimitv3.RateLimitDescriptor
	statuses []*rlsv3.RateLimitResponse_DescriptorStatus
}

// DescriptorResult is one descriptor a check sent and what the service
// answered for it.
type DescriptorResult struct {
	// Entries are the descriptor's keys and the values the request gave.
	Entries []Entry
	// Tokens: the descriptor counts LLM tokens (looked at, charged after
	// the response); otherwise it counts requests.
	Tokens bool
	// Code is the service's answer: OK or OVER_LIMIT ("" when it did not
	// answer).
	Code string
	// Limit, Unit, Remaining and Reset are the limit the service applied,
	// when it told one (HasLimit).
	HasLimit  bool
	Limit     uint32
	Unit      string
	Remaining uint32
	Reset     time.Duration
}

// Sent lists the descriptors the check sent, with the service's answer
// for each; nil when none applied to the request. It allocates: the data
// plane calls it only for a traced request.
func (v *Verdict) Sent() []DescriptorResult {
	var out []DescriptorResult
	for i, d := range v.sent {
		r := DescriptorResult{Tokens: d.HitsAddend != nil}
		for _, e := range d.Entries {
			r.Entries = append(r.Entries, Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		if i < len(v.statuses) {
			st := v.statuses[i]
			r.Code = st.GetCode().String()
			if cl := st.GetCurrentLimit(); cl != nil {
				r.HasLimit, r.Limit, r.Unit = true, cl.GetRequestsPerUnit(), strings.ToLower(cl.GetUnit().String())
				r.Remaining, r.Reset = st.GetLimitRemaining(), st.GetDurationUntilReset().AsDuration().Round(time.Second)
			}
		}
		out = append(out, r)
	}
	return out
}

// Check evaluates the descriptors for a request (act holds "request" and
// "source") and asks the service. A descriptor whose expression fails
// fails the check under failClosed and is skipped under failOpen
// (Verdict.Skipped).
func (l *Limiter) Check(ctx context.Context, act any) Verdict {
	var v Verdict
	req := &rlsv3.RateLimitRequest{Domain: l.policy.Domain, HitsAddend: 1}
	for i, d := range l.descs {
		rd, err := d.eval(act)
		if err != nil {
			// A descriptor that cannot be made is the service not asked
			// about that limit: the failure mode decides, as when the
			// service is down (the reference skips it even when failing
			// closed, its issue 3523).
			err = &descriptorError{Index: i, Err: err}
			if l.policy.FailureMode == FailClosed && !l.policy.SkipUnevaluated {
				v.Outcome, v.Err = Failed, err
				return v
			}
			v.Skipped = append(v.Skipped, err)
			continue
		}
		if d.tokens {
			rd.HitsAddend = wrapperspb.UInt64(0)
			v.charge = append(v.charge, rd)
		}
		req.Descriptors = append(req.Descriptors, rd)
	}
	if len(req.Descriptors) == 0 {
		return v
	}
	v.sent = req.Descriptors
	ctx, cancel := context.WithTimeout(ctx, l.policy.Timeout)
	defer cancel()
	resp, err := l.client.ShouldRateLimit(ctx, req)
	if err != nil {
		v.Outcome, v.Err = Failed, fmt.Errorf("rate limit service %s: %w", l.policy.Addr, err)
		return v
	}
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		v.Outcome = OverLimit
	}
	statuses := resp.GetStatuses()
	v.statuses = statuses
	for i, st := range statuses {
		if i < len(req.Descriptors) && req.Descriptors[i].HitsAddend != nil && st.GetCurrentLimit() != nil && st.GetLimitRemaining() == 0 {
			// A token budget with nothing left: the next request needs at
			// least one token, as with local limits.
			v.Outcome = OverLimit
		}
	}
	v.Decision = decision(statuses, req.Descriptors)
	v.Decision.Allowed = v.Outcome != OverLimit
	return v
}

// Charge takes the tokens a response used from the budgets its request
// matched. It waits for the service (bounded by the timeout), so a request
// sent after the response ends sees the charge.
func (l *Limiter) Charge(ctx context.Context, v *Verdict, tokens uint64) error {
	if len(v.charge) == 0 || tokens == 0 {
		return nil
	}
	req := &rlsv3.RateLimitRequest{Domain: l.policy.Domain}
	for _, d := range v.charge {
		req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{Entries: d.Entries, Limit: d.Limit, HitsAddend: wrapperspb.UInt64(tokens)})
	}
	ctx, cancel := context.WithTimeout(ctx, l.policy.Timeout)
	defer cancel()
	if _, err := l.client.ShouldRateLimit(ctx, req); err != nil {
		return fmt.Errorf("rate limit service %s: %w", l.policy.Addr, err)
	}
	return nil
}

// eval is the descriptor d gives the request, or why it cannot be made:
// an expression that fails, or yields a value a descriptor cannot carry.
func (d compiled) eval(act any) (*ratelimitv3.RateLimitDescriptor, error) {
	rd := &ratelimitv3.RateLimitDescriptor{}
	for i, prog := range d.values {
		out, _, err := prog.Eval(act)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", d.keys[i], err)
		}
		s, ok := scalarString(out.Value())
		if !ok {
			return nil, fmt.Errorf("entry %q: %T is not a string, bool or number", d.keys[i], out.Value())
		}
		rd.Entries = append(rd.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: d.keys[i], Value: s})
	}
	if d.override != nil {
		out, _, err := d.override.Eval(act)
		if err != nil {
			return nil, fmt.Errorf("limitOverride: %w", err)
		}
		m, err := out.ConvertToNative(reflect.TypeFor[map[string]any]())
		if err != nil {
			return nil, fmt.Errorf("limitOverride: %w", err)
		}
		unit, ok := overrideUnits[fmt.Sprint(m.(map[string]any)["unit"])]
		n, nok := m.(map[string]any)["requestsPerUnit"].(int64)
		if !ok || !nok || n < 0 || n > math.MaxUint32 {
			return nil, fmt.Errorf("limitOverride: want {requestsPerUnit: 0..%d, unit}, got %v", uint32(math.MaxUint32), m)
		}
		rd.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(n), Unit: unit}
	}
	return rd, nil
}

// decision picks the status for the headers: of those over their limit
// (the ones that denied), the one with the longest reset, which is when
// the request could next pass (the reference's Retry-After for a remote
// denial, its PR 3386; the IETF draft's "not earlier than the window's
// end"); with none over, the most constrained (fewest remaining). Its
// limit with every window (Envoy's x-ratelimit-limit form, "10,
// 10;w=60"), its remaining and its reset.
//
// Requests and Tokens are the same choice among the descriptors of each
// kind (sent: the descriptors asked about, in the statuses' order; a
// token descriptor carries a hits addend).
func decision(statuses []*rlsv3.RateLimitResponse_DescriptorStatus, sent []*ratelimitv3.RateLimitDescriptor) ratelimit.Decision {
	var d ratelimit.Decision
	var windows []string
	var requests, tokens ratelimit.Window
	best := uint64(math.MaxUint64)
	denied := false
	for i, st := range statuses {
		cl := st.GetCurrentLimit()
		if cl == nil {
			continue
		}
		w := unitSeconds(cl.GetUnit())
		windows = append(windows, strconv.FormatUint(uint64(cl.GetRequestsPerUnit()), 10)+";w="+strconv.FormatUint(w, 10))
		over := st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT
		r := uint64(st.GetLimitRemaining())
		reset := st.GetDurationUntilReset().AsDuration().Round(time.Second)
		if over && (!denied || reset > d.Reset) || !denied && !over && r < best {
			best, denied = r, over
			d = ratelimit.Decision{Limited: true, Limit: uint64(cl.GetRequestsPerUnit()), Remaining: r, Reset: reset}
		}
		win := ratelimit.Window{Set: true, Limit: uint64(cl.GetRequestsPerUnit()), Period: time.Duration(w) * time.Second,
			Remaining: r, Reset: reset, Full: reset, Refused: over}
		if i < len(sent) && sent[i].HitsAddend != nil {
			// A token budget with nothing left refuses the next request.
			win.Refused = over || r == 0
			tokens = tokens.Tighter(win)
		} else {
			requests = requests.Tighter(win)
		}
	}
	if d.Limited {
		d.LimitHeader = strconv.FormatUint(d.Limit, 10) + ", " + strings.Join(windows, ", ")
		d.Requests, d.Tokens = requests, tokens
	}
	return d
}

func unitSeconds(u rlsv3.RateLimitResponse_RateLimit_Unit) uint64 {
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return 1
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return 86400
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 1
}

// scalarString is a descriptor value as sent: a string as it is, a bool or
// a number as its text.
func scalarString(v any) (string, bool) { return celexpr.String(v) }
