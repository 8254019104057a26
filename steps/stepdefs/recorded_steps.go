package stepdefs

import (
	"context"
	"fmt"
	"strings"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

func registerRecordedSteps(sc *godog.ScenarioContext) {
	step(sc, `^the recorded trace:$`, (*state).recordedTrace)
	step(sc, `^the trace checks pass$`, (*state).traceChecksPass)
	step(sc, `^the trace checks fail with "([^"]*)"$`, (*state).traceChecksFailWith)
}

func (s *state) recordedTrace(ctx context.Context, doc *godog.DocString) error {
	text := strings.ReplaceAll(doc.Content, `\n`, "\n")
	s.recorded = nil
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		e, err := trace.Parse([]byte(line))
		if err != nil {
			return fmt.Errorf("recorded trace line %d is not a JSON event: %v", i+1, err)
		}
		s.recorded = append(s.recorded, e)
	}
	return nil
}

func (s *state) traceChecksPass(ctx context.Context) error {
	ev := s.recorded
	return violations(tracecheck.Check(ev), ev)
}

func (s *state) traceChecksFailWith(ctx context.Context, reason string) error {
	ev := s.recorded
	v := tracecheck.Check(ev)
	for _, x := range v {
		if strings.Contains(x.String(), reason) {
			return nil
		}
	}
	return fmt.Errorf("trace checks: got %v, want a violation saying %q", v, reason)
}
