// Package stepdefs holds the godog step definitions of the conformance
// suite, one file per topic (setup, requests, traces, admin, conditions,
// recorded traces), and the one per-scenario state they share, carried in
// the scenario's context. The engine (package steps) starts and ends each
// scenario (Begin, End) and registers the steps (Register); the steps reach
// the proxy only through a steps/target Target.
package stepdefs

import (
	"context"
	"errors"
	"reflect"

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
	registerTraceSteps(sc)
	registerAdminSteps(sc)
	registerConditionSteps(sc)
	registerRecordedSteps(sc)
	registerGlobalSteps(sc)
	registerFollowSteps(sc)
	registerPodSteps(sc)
}

var errorType = reflect.TypeFor[error]()

// step registers fn, a func(context.Context, ...) error, so that a failure
// in an @extended scenario the proxy does not claim to support is recorded
// as "unsupported" and skips the rest of the scenario instead of failing it,
// and so is a failure after the run was interrupted, recorded as not run.
func step(sc *godog.ScenarioContext, pattern string, fn any) {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.NumIn() == 0 || t.In(0) != reflect.TypeFor[context.Context]() || t.NumOut() != 1 || t.Out(0) != errorType {
		panic("step " + pattern + ": want func(context.Context, ...) error")
	}
	sc.Step(pattern, reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		out := v.Call(args)
		err, _ := out[0].Interface().(error)
		if err == nil || errors.Is(err, godog.ErrSkip) {
			return out
		}
		ctx := args[0].Interface().(context.Context)
		if s := getState(ctx); s != nil {
			err = s.stepErr(ctx, err)
		}
		ev := reflect.New(errorType).Elem()
		ev.Set(reflect.ValueOf(&err).Elem())
		return []reflect.Value{ev}
	}).Interface())
}
