package stepdefs

import (
	"context"
	"fmt"
	"strings"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// The steps of the proxy-pods feature: what a proxy running in a cluster's
// pods must show of them (spec parts 2.1 and 2.4).
func registerPodSteps(sc *godog.ScenarioContext) {
	step(sc, `^every request and response snapshot has env with podName, namespace and gateway$`, (*state).everySnapshotHasEnv)
	step(sc, `^the env of every snapshot names the proxy pod, its namespace and its Gateway$`, (*state).everySnapshotEnvNamesPod)
	step(sc, `^the Gateway was Programmed only once its proxy could serve traffic$`, (*state).gatewayProgrammedOnlyWhenServing)
}

func (s *state) everySnapshotHasEnv(ctx context.Context) error {
	return s.everyEnv(nil)
}

func (s *state) everySnapshotEnvNamesPod(ctx context.Context) error {
	ce, ok := s.dep.(targets.ClusterEnv)
	if !ok {
		return fmt.Errorf("the %s target does not say which pod serves the scenario (targets.ClusterEnv); this scenario needs a cluster target whose proxy runs in pods", s.cfg.Target.Name())
	}
	want, err := ce.ProxyEnv()
	if err != nil {
		return err
	}
	return s.everyEnv(&want)
}

func (s *state) gatewayProgrammedOnlyWhenServing(ctx context.Context) error {
	d, err := s.deployment(ctx)
	if err != nil {
		return err
	}
	po, ok := d.(targets.ProgrammedObserver)
	if !ok {
		return fmt.Errorf("the %s target does not watch when the Gateway becomes Programmed (targets.ProgrammedObserver); this scenario needs a cluster target whose proxy runs in pods", s.cfg.Target.Name())
	}
	seen, err := po.ProgrammedSeen()
	if err != nil {
		return err
	}
	if !seen.ProxyReady {
		c := seen.Programmed
		return fmt.Errorf("Gateway condition Programmed: got status %q reason %q (%s) while no proxy pod of the Gateway was Ready (%s), want status True only once a proxy pod is Ready",
			c.Status, c.Reason, c.Message, seen.Pods)
	}
	return nil
}

// envFields are the fields of a snapshot's env in cluster mode (spec 2.1).
var envFields = []string{"podName", "namespace", "gateway"}

// everyEnv checks that every request and response snapshot of the trace
// carries env with podName, namespace and gateway as strings, equal to
// want's when it is set. A trace with no snapshot of either kind fails.
func (s *state) everyEnv(want *targets.Env) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	seen := map[trace.MessageType]bool{}
	var bad []string
	for i, e := range t.Events {
		if e.Type() != trace.RequestSnapshot && e.Type() != trace.ResponseSnapshot {
			continue
		}
		seen[e.Type()] = true
		where := fmt.Sprintf("event %d %s", i+1, tracecheck.Name(e))
		v, present := tracecheck.Lookup(tracecheck.State(e), "env")
		env, ok := v.(map[string]any)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: requestState.env: got %s, want an object with podName, namespace and gateway", where, describe(v, present)))
			continue
		}
		wants := map[string]string{}
		if want != nil {
			wants = map[string]string{"podName": want.PodName, "namespace": want.Namespace, "gateway": want.Gateway}
		}
		for _, f := range envFields {
			got, present := env[f]
			str, isStr := got.(string)
			switch w, check := wants[f]; {
			case !isStr:
				bad = append(bad, fmt.Sprintf("%s: env.%s: got %s, want a string", where, f, describe(got, present)))
			case check && str != w:
				bad = append(bad, fmt.Sprintf("%s: env.%s: got %q, want %q", where, f, str, w))
			}
		}
	}
	for _, typ := range []trace.MessageType{trace.RequestSnapshot, trace.ResponseSnapshot} {
		if !seen[typ] {
			bad = append(bad, fmt.Sprintf("trace has no %s; got %s", typ, names(t.Events)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "\n"))
	}
	return nil
}
