// Package watch is what a client may ask of /debug/trace: a request
// filter (`?expression=<CEL>`), following many requests on one stream
// (`?follow=true&max=N&duration=D`, bounded) and an outcome filter over a
// followed request's end (`?outcome=<CEL>`). The reference proxy serves
// it (refproxy/internal/tracing), gwdiag asks it and checks what came back against
// it (cli/internal/tracecmd), so both take the bounds, the parsing and the CEL
// environments from here. docs/admin.md "The trace endpoint".
package watch

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
)

// A follow stream traces many requests, bounded by the proxy: at most Max
// requests, for at most Duration, and at most MaxFollowers streams at
// once. Every event of a followed request carries its requestId, and
// requestFinished its per-phase timings.
const (
	DefaultFollowMax      = 10
	MaxFollowMax          = 1000
	DefaultFollowDuration = 30 * time.Second
	MaxFollowDuration     = 10 * time.Minute
	// MaxFollowers bounds the follow streams at once; more are refused
	// (429).
	MaxFollowers = 4
)

// Follow is how many requests a follow stream traces, for how long.
type Follow struct {
	Max      int
	Duration time.Duration
}

// ParseFollow reads max and duration as the trace endpoint takes them
// (empty: the defaults), refusing values beyond the ceilings.
func ParseFollow(maxParam, durationParam string) (Follow, error) {
	o := Follow{Max: DefaultFollowMax, Duration: DefaultFollowDuration}
	if maxParam != "" {
		n, err := strconv.Atoi(maxParam)
		if err != nil || n < 1 || n > MaxFollowMax {
			return o, fmt.Errorf("max %q: want 1 to %d requests", maxParam, MaxFollowMax)
		}
		o.Max = n
	}
	if durationParam != "" {
		d, err := time.ParseDuration(durationParam)
		if err != nil || d <= 0 || d > MaxFollowDuration {
			return o, fmt.Errorf("duration %q: want a duration up to %s, e.g. 30s", durationParam, MaxFollowDuration)
		}
		o.Duration = d
	}
	return o, nil
}

var filterEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)))
})

// CompileFilter checks a request filter: a CEL expression yielding a bool
// over `request` (method, path, pathAndQuery, host, scheme, uri, version
// and headers with lower-case names), e.g.
// `request.path.startsWith("/v1") && request.headers["x-team"] == "blue"`.
func CompileFilter(expression string) (cel.Program, error) {
	env, err := filterEnv()
	if err != nil {
		return nil, err
	}
	_, prg, err := compileBool(env, expression)
	return prg, err
}

var outcomeEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("response", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("latencyMicros", cel.IntType),
	)
})

// CompileOutcome checks an outcome filter: a CEL expression yielding a
// bool over response.code (the status the client received) and
// latencyMicros (the whole request), e.g. `response.code >= 500` or
// `latencyMicros > 500000`.
func CompileOutcome(expression string) (cel.Program, error) {
	env, err := outcomeEnv()
	if err != nil {
		return nil, err
	}
	ast, prg, err := compileBool(env, expression)
	if err != nil {
		return nil, err
	}
	o := &outcomeProgram{Program: prg}
	if !readsIdent(ast, "latencyMicros") {
		o.byCode = new([outcomeCodes]atomic.Uint32)
	}
	return o, nil
}

// compileBool parses and checks expression in env; it must yield a bool
// (or a dynamic value: a map lookup).
func compileBool(env *cel.Env, expression string) (*cel.Ast, cel.Program, error) {
	ast, iss := env.Compile(expression)
	if iss.Err() != nil {
		return nil, nil, iss.Err()
	}
	if t := ast.OutputType(); t != cel.DynType && t.Kind() != cel.BoolType.Kind() {
		return nil, nil, fmt.Errorf("expression yields %s, want bool", t)
	}
	prg, err := env.Program(ast)
	return ast, prg, err
}

// outcomeProgram is a compiled outcome filter. A proxy asks it once per
// request an outcome watcher held, so its answer must cost next to
// nothing: an expression that does not read latencyMicros is a function
// of the status alone (response holds nothing else), and its result is
// evaluated once per status, then remembered (byCode: 0 not yet, 1
// false, 2 true). One that reads latencyMicros is evaluated each time.
// TestOutcomeMemoMatchesCEL proves the two ways agree.
type outcomeProgram struct {
	cel.Program
	byCode *[outcomeCodes]atomic.Uint32
}

// outcomeCodes bounds the statuses remembered; others are evaluated.
const outcomeCodes = 1000

func (o *outcomeProgram) accepts(code, latencyMicros int64) bool {
	if o.byCode == nil || code < 0 || code >= outcomeCodes {
		return evalOutcome(o.Program, code, latencyMicros)
	}
	slot := &o.byCode[code]
	switch slot.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	ok := evalOutcome(o.Program, code, latencyMicros)
	v := uint32(1)
	if ok {
		v = 2
	}
	slot.Store(v)
	return ok
}

// readsIdent reports whether the checked expression names the identifier
// anywhere (a variable can only be read through its name).
func readsIdent(ast *cel.Ast, name string) bool {
	for _, e := range celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), celast.KindMatcher(celast.IdentKind)) {
		if e.AsIdent() == name {
			return true
		}
	}
	return false
}

// OutcomeAccepts reports whether a compiled outcome filter (CompileOutcome)
// keeps a trace whose client got status code after latencyMicros. The
// proxy asks it to keep or drop a held trace; a client checks with it
// what a proxy that ignores the filter sent.
func OutcomeAccepts(outcome cel.Program, code, latencyMicros int64) bool {
	if o, ok := outcome.(*outcomeProgram); ok {
		return o.accepts(code, latencyMicros)
	}
	return evalOutcome(outcome, code, latencyMicros)
}

// evalOutcome evaluates an outcome filter over its variables.
func evalOutcome(outcome cel.Program, code, latencyMicros int64) bool {
	out, _, err := outcome.Eval(map[string]any{"response": map[string]any{"code": code}, "latencyMicros": latencyMicros})
	return err == nil && out.Value() == true
}
