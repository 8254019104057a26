package steps

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// resetScenario compares two requests in one second's window.
const resetScenario = "The window resets with no manual action"

// slowWay stands for a slow way to the proxy (a loaded machine, a
// port-forward): the first n requests to a listener reach the faithful
// reference proxy only after a second's window has passed (n < 0: all).
func slowWay(n int64, reject bool) fault {
	var seen atomic.Int64
	return fault{
		listener: func(_ *faultyDeployment, next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n < 0 || seen.Add(1) <= n {
					// The slowness under test, not a wait for an event.
					time.Sleep(1100 * time.Millisecond)
				}
				if reject {
					// A proxy that refuses every request: no window
					// explains it.
					http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
					return
				}
				next.ServeHTTP(w, r)
			})
		},
	}
}

func runReset(t *testing.T, f fault) (*ConformanceReport, ScenarioReport, string, string) {
	t.Helper()
	return runSlow(t, f, "@request-limits", resetScenario)
}

// runSlow runs one scenario against the faithful proxy behind f, and
// returns the report, the scenario's result, the progress output and the
// JUnit and cucumber JSON files.
func runSlow(t *testing.T, f fault, tags, scenario string) (*ConformanceReport, ScenarioReport, string, string) {
	t.Helper()
	dir := t.TempDir()
	var out strings.Builder
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: f}, Output: &out, Tags: tags,
		RunScenario: scenario, Concurrency: 1, JUnit: filepath.Join(dir, "junit.xml"), CucumberJSON: filepath.Join(dir, "cucumber.json")}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Scenario(scenario)
	if len(got) != 1 {
		t.Fatalf("%d results for %q, want 1:\n%s", len(got), scenario, out.String())
	}
	junit, err := os.ReadFile(o.JUnit)
	if err != nil {
		t.Fatal(err)
	}
	cucumber, err := os.ReadFile(o.CucumberJSON)
	if err != nil {
		t.Fatal(err)
	}
	return rep, got[0], out.String(), string(junit) + "\n" + string(cucumber)
}

// TestSlowWayIsNoVerdict: requests that outlast the window they were to
// share say nothing of the proxy. On a way to the faithful proxy slow at
// every request, the scenario is tried three times, never failed: the run
// is incomplete and says why.
func TestSlowWayIsNoVerdict(t *testing.T) {
	t.Parallel()
	rep, s, out, files := runReset(t, slowWay(-1, false))
	if rep.Failed() || s.Result != NotRun || s.Tries != inconclusiveTries || !strings.Contains(s.Message, "took") {
		t.Fatalf("%+v (tries %d): want not run after %d tries, saying how long the requests took\n%s", s, s.Tries, inconclusiveTries, out)
	}
	if rep.Incomplete == nil || len(rep.Incomplete.Missing) != 1 || rep.Incomplete.Missing[0].Reason != inconclusiveMissing {
		t.Errorf("incomplete %+v: want the run incomplete, for want of a quick enough machine", rep.Incomplete)
	}
	for _, want := range []string{"NO VERDICT", "try 2 of 3", "try 3 of 3", "run incomplete:"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(files, "<failure") || strings.Contains(files, `"failed"`) {
		t.Errorf("JUnit or cucumber JSON says failed:\n%s", clipText(files, 3000))
	}
}

// TestSlowFirstTryPassesAtTheSecond: a way slow only for the first try
// (its two requests); the second try reaches a verdict, and it counts: the
// scenario passed at try 2, and the JUnit and cucumber files say passed.
func TestSlowFirstTryPassesAtTheSecond(t *testing.T) {
	t.Parallel()
	rep, s, out, files := runReset(t, slowWay(2, false))
	if rep.Failed() || rep.Incomplete != nil || s.Result != Passed || s.Tries != 2 || !strings.Contains(s.Message, "passed at try 2") {
		t.Fatalf("%+v: want passed at try 2, the run complete\n%s", s, out)
	}
	open := `<testcase name="` + resetScenario + `" status="passed"`
	i := strings.Index(files, open)
	if i < 0 {
		t.Fatalf("JUnit: no passed test case %q:\n%s", resetScenario, clipText(files, 4000))
	}
	tc, _, _ := strings.Cut(files[i:], "</testcase>")
	if strings.Contains(tc, "<error") || strings.Contains(tc, "<failure") || strings.Contains(tc, "<skipped") || !strings.Contains(tc, "passed at try 2") {
		t.Errorf("JUnit: want the test case passed, saying its tries, nothing skipped or failed:\n%s", tc)
	}
	var doc []struct {
		Elements []struct {
			Name  string
			Steps []struct {
				Result struct{ Status string }
			}
		}
	}
	if err := json.Unmarshal([]byte(cucumberOf(files)), &doc); err != nil {
		t.Fatalf("cucumber JSON: %v", err)
	}
	found := false
	for _, f := range doc {
		for _, e := range f.Elements {
			if e.Name != resetScenario {
				continue
			}
			found = true
			for i, st := range e.Steps {
				if st.Result.Status != "passed" {
					t.Errorf("cucumber JSON: step %d of %q is %s, want passed", i+1, e.Name, st.Result.Status)
				}
			}
		}
	}
	if !found {
		t.Errorf("cucumber JSON: no element %q", resetScenario)
	}
}

// cucumberOf is the cucumber JSON of runReset's files (after the JUnit).
func cucumberOf(files string) string {
	_, after, _ := strings.Cut(files, "</testsuites>")
	return after
}

// TestSlowWrongRefusalFails: a refusal no window explains (the first
// request refused) is the proxy's failure at once, however slow the way:
// no second try.
func TestSlowWrongRefusalFails(t *testing.T) {
	t.Parallel()
	rep, s, out, _ := runReset(t, slowWay(-1, true))
	if !rep.Failed() || s.Result != Failed || s.Tries != 0 || !strings.Contains(s.Message, "response statuses: got [429 429]") {
		t.Fatalf("%+v (tries %d): want failed at the first try on statuses [429 429]\n%s", s, s.Tries, out)
	}
	if strings.Contains(out, "try 2 of") {
		t.Errorf("a failure no window explains was tried again:\n%s", out)
	}
}

// TestSlowStreamIsNoVerdict: the single status step too. After a stream
// that took the token budget over, the next request came after the
// window: admitted where a 429 was wanted, no verdict.
func TestSlowStreamIsNoVerdict(t *testing.T) {
	t.Parallel()
	const scenario = "A streaming response is counted from its final chunk and never cut"
	rep, s, out, _ := runSlow(t, slowWay(-1, false), "@token-overage", scenario)
	if rep.Failed() || s.Result != NotRun || s.Tries != inconclusiveTries || !strings.Contains(s.Message, "response statuses [200], want [429]") {
		t.Fatalf("%+v (tries %d): want not run after %d tries, on the status 200 where 429 was wanted\n%s", s, s.Tries, inconclusiveTries, out)
	}
}

// TestRepeatCountsOnlyVerdicts: with --repeat, an inconclusive attempt is
// left out of the verdict: the first attempt (slow) said nothing, the two
// others passed, and the scenario passed, neither flaky nor not run.
func TestRepeatCountsOnlyVerdicts(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: slowWay(2, false)}, Output: &out, Tags: "@request-limits",
		RunScenario: resetScenario, Concurrency: 1, Repeat: 3}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || rep.Incomplete != nil || rep.Summary.Passed != 1 || !strings.Contains(out.String(), "NO VERDICT") {
		t.Fatalf("summary %+v, incomplete %+v: want the scenario passed, its slow attempt without a verdict\n%s", rep.Summary, rep.Incomplete, out.String())
	}
}

// takesEachRefill stands for another client of the proxy that gets in
// first once the limit refused the suite: after the first 429, each token
// the window gives back is that client's. Each of the suite's requests is
// sent on until the proxy refuses it, and each answer before that (a
// token the window gave back) is the other client's, which the suite
// never sees; the suite gets the refusal. A refill that lands between two
// requests is so taken as well (one request of the other client before
// the suite's, as this was first written, left the suite a 2xx when the
// window refilled between the two: a race-mode CI run, 2026-12-08).
func takesEachRefill() fault {
	return fault{listener: func(_ *faultyDeployment, next http.Handler) http.Handler {
		var refused atomic.Bool
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !refused.Load() {
				next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, _ http.Header) {
					if code == http.StatusTooManyRequests {
						refused.Store(true)
					}
				}}, r)
				return
			}
			for range 100 { // bounded: a window does not refill 100 times between two requests
				rec := httptest.NewRecorder()
				next.ServeHTTP(rec, r.Clone(r.Context()))
				if rec.Code >= 200 && rec.Code < 300 {
					continue // the other client's
				}
				maps.Copy(w.Header(), rec.Header())
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				return
			}
			http.Error(w, "takesEachRefill: 100 answers in a row were 2xx", http.StatusInternalServerError)
		})
	}}
}

// TestWindowWaitSaysWhatTookTheBudget: a wait for a window that never
// gave the suite its 2xx tells the two causes apart by what the backend
// received: as many requests as the suite's 2xx answers when the limit
// never refilled, more when something else took each refill.
func TestWindowWaitSaysWhatTookTheBudget(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		f    fault
		want string
	}{
		"limits never reset": {faults["limits never reset"],
			"; the backends received 1 request (httpbin 1), as many as the 2xx answers the suite got: nothing else was let through"},
		"another client takes each refill": {takesEachRefill(),
			"more than the 2xx answers the suite got (1): requests it did not send, or whose answers it never got, were let through"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, s, out, _ := runReset(t, tc.f)
			if s.Result != Failed || !strings.Contains(s.Message, "no 2xx within 3s") || !strings.Contains(s.Message, tc.want) {
				t.Fatalf("%s: %s\nwant failed, saying %q\n%s", s.Result, s.Message, tc.want, out)
			}
		})
	}
}

// anotherRequestFirst stands for another client of the proxy whose request
// arrives just before each of the suite's chat completions: GET /elsewhere,
// which the route "/" forwards, and a one-shot trace watcher takes.
func anotherRequestFirst() fault {
	return fault{listener: func(_ *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/v1/") {
				other := httptest.NewRequestWithContext(r.Context(), http.MethodGet, "/elsewhere", nil)
				other.Host = r.Host
				next.ServeHTTP(httptest.NewRecorder(), other)
			}
			next.ServeHTTP(w, r)
		})
	}}
}

// TestTraceOfAnotherRequestSaysWhose: a trace watcher that took another
// client's request (2026-11-29: "a 429 with no policySelection or
// localRateLimit event") says whose request its trace is of.
func TestTraceOfAnotherRequestSaysWhose(t *testing.T) {
	t.Parallel()
	const scenario = "A token limit names its entry once a response took its budget"
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: anotherRequestFirst()}, Output: &strings.Builder{},
		AllFeatures: true, Tags: "@trace-explains-outcome", RunScenario: scenario, Producer: Producer{Version: catalogueProducer}}
	// The message quotes what the trace saw: no credential of the run's.
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sc := rep.Scenario(scenario)
	const want = "the trace has no policy event of kind localRateLimit; got [requestStarted, requestSnapshot (initial request), "
	if len(sc) != 1 || sc[0].Result != Failed || !strings.Contains(sc[0].Message, want) ||
		!strings.HasSuffix(sc[0].Message, "requestFinished], the trace of GET /elsewhere, answered 200") {
		t.Fatalf("got %+v\nwant failed: %s..., the trace of GET /elsewhere, answered 200", sc, want)
	}
}
