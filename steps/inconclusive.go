package steps

import (
	"context"
	"fmt"

	"github.com/cucumber/godog"
)

// inconclusiveTries is how many times a scenario runs while its tries are
// inconclusive: a step found that its requests outlasted a rate-limit
// window (a loaded machine, a slow port-forward), so that what came says
// nothing of the proxy. Only a try that reaches a verdict counts; a
// scenario inconclusive every time is not run, and the run incomplete.
const inconclusiveTries = 3

// scenarioKey names one scenario of a run: an outline's examples share
// their name, and the line of their Examples row tells them apart.
type scenarioKey struct {
	name    string
	example int
}

// retrying reports whether the runner is trying inconclusive scenarios
// again.
func (r *runner) retrying() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.again != nil
}

// triesAgain reports whether p is one of the scenarios tried again.
func (r *runner) triesAgain(p *godog.Scenario) bool {
	k := scenarioKey{p.Name, r.exampleLine(p)}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.again[k]
	return ok
}

// tryInconclusiveAgain runs the suite again for the scenarios whose try
// was inconclusive, up to inconclusiveTries in all, each try's result
// taking the place of the one before. Their reports say how many tries they
// took and why the earlier ones said nothing. It returns godog's status of
// the tries.
func (r *runner) tryInconclusiveAgain(ctx context.Context, suite godog.TestSuite) int {
	status := 0
	for try := 2; try <= inconclusiveTries; try++ {
		again := map[scenarioKey]int{}
		r.mu.Lock()
		for i, res := range r.results {
			if res.inconclusive != "" {
				again[scenarioKey{res.Name, res.Example}] = i
			}
		}
		first := len(r.results)
		if len(again) > 0 {
			r.again = again
		}
		r.mu.Unlock()
		if len(again) == 0 || ctx.Err() != nil || r.stopped() != "" {
			break
		}
		fmt.Fprintf(r.out, "try %d of %d of the %d scenarios whose last try was inconclusive (their requests outlasted a rate-limit window)\n", try, inconclusiveTries, len(again))
		// godog's own reports (JUnit, cucumber JSON) are the first try's:
		// the runner rewrites them from the results at the end.
		opts := *suite.Options
		opts.Format = "progress"
		retry := suite
		retry.Options = &opts
		status |= retry.Run()
		r.mu.Lock()
		for _, res := range r.results[first:] {
			i, ok := r.again[scenarioKey{res.Name, res.Example}]
			if !ok {
				continue
			}
			before := r.results[i]
			res.Tries = try
			earlier := before.earlierTries
			if earlier == "" {
				earlier = before.inconclusive
			} else {
				earlier += "; " + before.inconclusive
			}
			res.earlierTries = earlier
			if res.Result == Passed {
				res.Message = fmt.Sprintf("passed at try %d; the earlier said nothing of the proxy: %s", try, earlier)
			}
			r.results[i] = res
		}
		r.results = r.results[:first]
		r.again = nil
		r.mu.Unlock()
	}
	r.notRunInconclusive()
	return status
}

// notRunInconclusive makes each scenario whose last try was inconclusive
// not run, for want of a machine quick enough: the run is incomplete.
func (r *runner) notRunInconclusive() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.results {
		if r.results[i].inconclusive != "" {
			r.results[i].missing = inconclusiveMissing
		}
	}
}

// inconclusiveMissing is what an incomplete run says of the scenarios
// inconclusive at every try.
var inconclusiveMissing = fmt.Sprintf("a rate-limit window ended under the scenario's requests in each of its %d tries: "+
	"this machine, or the way to the proxy, was too slow to test it (run again with fewer tests beside it, or --concurrency 1)", inconclusiveTries)
