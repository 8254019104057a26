// Package stepdefs holds the godog step definitions of the conformance
// suite and the one per-scenario state they share, carried in the
// scenario's context. Each step is a named method of the state, registered
// one line each by the register function of its topic file (setup,
// requests, traces, follow, admin, conditions, pods, global limits,
// explanations, redaction, recorded traces). Topic files call the state
// (state.go, and its means shared by topics: state_requests.go,
// state_traces.go), the shared wording (format.go) and the planted secrets
// (secrets.go), never each other. The engine (package steps) starts and
// ends each scenario (Begin, End) and registers the steps (Register); the
// steps reach the proxy only through a steps/targets Target.
package stepdefs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime/debug"
	"sync"

	"github.com/cucumber/godog"
)

// Register composes the step definitions of every topic, and notes the
// first step of a scenario that fails (End reports it).
func Register(sc *godog.ScenarioContext) {
	sc.StepContext().After(func(ctx context.Context, st *godog.Step, _ godog.StepResultStatus, err error) (context.Context, error) {
		if s := getState(ctx); s != nil && err != nil && s.failedStep == "" {
			s.failedStep = st.Text
		}
		// nil keeps the step's error as it is; returning it would repeat it.
		return ctx, nil
	})
	registerSetupSteps(sc)
	registerRequestSteps(sc)
	registerRateLimitFamilySteps(sc)
	registerTraceSteps(sc)
	registerAdminSteps(sc)
	registerConditionSteps(sc)
	registerRecordedSteps(sc)
	registerGlobalSteps(sc)
	registerFollowSteps(sc)
	registerPodSteps(sc)
	registerExplainSteps(sc)
	registerRedactSteps(sc)
	registerOTLPSteps(sc)
}

var errorType = reflect.TypeFor[error]()

// errNoState fails a step called outside a scenario begun by the engine.
var errNoState error = errors.New("no scenario state: the step ran outside a scenario")

// step registers fn, a func(context.Context, ...) error or a method of the
// scenario's state (func(*state, context.Context, ...) error, given as
// (*state).name: one registration line per step, the flagd way), so that a
// failure in an @extended scenario the proxy does not claim to support is
// recorded as "unsupported" and skips the rest of the scenario instead of
// failing it, and so is a failure after the run was interrupted, recorded
// as not run.
func step(sc *godog.ScenarioContext, pattern string, fn any) {
	v := reflect.ValueOf(fn)
	t := v.Type()
	method := t.NumIn() > 0 && t.In(0) == reflect.TypeFor[*state]()
	if method {
		// godog calls the step without the state: the function it sees
		// takes the rest, and the state comes from the context.
		in := make([]reflect.Type, 0, t.NumIn()-1)
		for i := 1; i < t.NumIn(); i++ {
			in = append(in, t.In(i))
		}
		t = reflect.FuncOf(in, []reflect.Type{errorType}, false)
	}
	if t.NumIn() == 0 || t.In(0) != reflect.TypeFor[context.Context]() || t.NumOut() != 1 || t.Out(0) != errorType {
		panic("step " + pattern + ": want func(context.Context, ...) error or func(*state, context.Context, ...) error")
	}
	sc.Step(compiled(pattern), reflect.MakeFunc(t, func(args []reflect.Value) (res []reflect.Value) {
		defer func() {
			// A panic in step code is a defect of the suite, reported as
			// the step's error (with where it happened) and, like any
			// error, as not run when the run was interrupted meanwhile.
			if v := recover(); v != nil {
				ctx := args[0].Interface().(context.Context)
				err := fmt.Errorf("suite defect: step panicked: %v\n%s", v, debug.Stack())
				if s := getState(ctx); s != nil {
					err = s.stepErr(ctx, err)
				}
				res = errValue(err)
			}
		}()
		call := args
		if method {
			s := getState(args[0].Interface().(context.Context))
			if s == nil {
				return []reflect.Value{reflect.ValueOf(&errNoState).Elem()}
			}
			call = append([]reflect.Value{reflect.ValueOf(s)}, args...)
		}
		out := v.Call(call)
		err, _ := out[0].Interface().(error)
		if err == nil || errors.Is(err, godog.ErrSkip) {
			return out
		}
		ctx := args[0].Interface().(context.Context)
		if s := getState(ctx); s != nil {
			err = s.stepErr(ctx, err)
		}
		return errValue(err)
	}).Interface())
}

// patterns holds each step's pattern compiled, once per process: godog
// asks for the steps again for every scenario, and compiling all their
// patterns each time was a quarter of the suite's own CPU (docs/ci.md,
// "What is built or started once"). A regexp.Regexp is safe for concurrent use.
var patterns sync.Map // string -> *regexp.Regexp

// compiled is pattern compiled (it panics on a bad one, as godog would).
func compiled(pattern string) *regexp.Regexp {
	if re, ok := patterns.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re, _ := patterns.LoadOrStore(pattern, regexp.MustCompile(pattern))
	return re.(*regexp.Regexp)
}

// errValue is err as the results of a step function.
func errValue(err error) []reflect.Value {
	ev := reflect.New(errorType).Elem()
	ev.Set(reflect.ValueOf(&err).Elem())
	return []reflect.Value{ev}
}
