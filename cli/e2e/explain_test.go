package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/ratelimitsvc"
)

// explainConfig has one route per outcome gwdiag explains; %[1]s is the
// echo backend, %[2]s the LLM, %[3]s a port nothing listens on, %[4]s the
// global rate-limit service.
const explainConfig = `
binds:
- port: 0
  listeners:
  - routes:
    - name: submit
      matches: [{path: {pathPrefix: /submit}, method: POST}]
      backends: [{host: "%[1]s"}]
    - name: tenant
      matches: [{path: {pathPrefix: /tenant}, headers: [{name: x-tenant, value: {exact: blue}}]}]
      backends: [{host: "%[1]s"}]
    - name: api
      matches: [{path: {pathPrefix: /api}}]
      policies: {localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 60s}]}
      backends: [{host: "%[1]s"}]
    - name: llm
      matches: [{path: {pathPrefix: /v1}}]
      policies:
        localRateLimit:
        - {maxTokens: 100, tokensPerFill: 100, fillInterval: 60s}
        - {maxTokens: 50, tokensPerFill: 50, fillInterval: 60s, type: tokens}
      backends: [{ai: {name: openai, provider: {openAI: {}}, hostOverride: "%[2]s"}}]
    - name: down
      matches: [{path: {pathPrefix: /down}}]
      backends: [{host: "%[3]s"}]
    - name: cut
      matches: [{path: {pathPrefix: /cut}}]
      backends: [{host: "%[1]s"}]
    - name: global
      matches: [{path: {pathPrefix: /global}}]
      policies:
        remoteRateLimit:
          host: "%[4]s"
          domain: gwdiag-explain
          descriptors: [{entries: [{key: user, value: 'request.headers["x-user"]'}]}]
      backends: [{host: "%[1]s"}]
`

// explainLimits is the global rate-limit service's configuration: one
// request a day per user.
const explainLimits = `
domain: gwdiag-explain
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1}
`

// explainCase is one outcome: the request (after --), the requests sent
// before it to bring the outcome about, and the verdict it must get.
type explainCase struct {
	name  string
	args  []string
	prime [][]string
	want  string // a regexp: only the seconds to a reset vary
	// global needs the rate-limit service.
	global bool
}

// TestExplainOutcomes: for each outcome the issue names (404 with no
// route, a route not matched by method or by header; 429 of a request
// limit, a token limit and a global limit on the real envoyproxy/ratelimit;
// 503 of a backend down; 502 of a body cut short), `gwdiag trace explain`
// names the cause in one line live on refproxy (inject mode), from the
// recorded trace (JSON Lines, and every request of one capture at once),
// and `gwdiag config explain` gives the same route verdict from the
// proxy's live /config_dump and from the dump saved to a file.
func TestExplainOutcomes(t *testing.T) {
	echo := httptest.NewServer(mock.NewEcho())
	t.Cleanup(echo.Close)
	llm := httptest.NewServer(mock.NewLLM())
	t.Cleanup(llm.Close)
	echoAddr, llmAddr, down := echo.Listener.Addr().String(), llm.Listener.Addr().String(), closedPort(t)

	rls, rlsErr := startExplainLimits(t)
	rlsAddr := closedPort(t)
	if rls != nil {
		rlsAddr = rls.Addr
	}
	p := startProxyYAML(t, fmt.Sprintf(explainConfig, echoAddr, llmAddr, down, rlsAddr))
	// A bind on port 0 (a free port) keys its routes bind/0.
	listener := "bind/0/listener0"
	user := fmt.Sprintf("u%d", time.Now().UnixNano())
	chat := []string{"-X", "POST", "-H", "content-type: application/json", "-d", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`}
	q := regexp.QuoteMeta
	cases := []explainCase{
		{name: "404 no route", args: []string{"http://gw.example/nowhere"},
			want: q(`404: no route matches path "/nowhere" (7 routes on ` + listener + `)`)},
		{name: "404 by method", args: []string{"http://gw.example/submit"},
			want: q(`404: no route matched; closest, default/submit: method is GET, the route wants POST (7 routes on ` + listener + `)`)},
		{name: "404 by header", args: []string{"http://gw.example/tenant/a", "-H", "x-tenant: red"},
			want: q(`404: no route matched; closest, default/tenant: header x-tenant is "red", the route wants exact "blue" (7 routes on ` + listener + `)`)},
		{name: "429 request limit", args: []string{"http://gw.example/api/a"}, prime: [][]string{{"http://gw.example/api/a"}},
			want: q(`429 from route default/api: localRateLimit[0] (1 request per minute) exhausted, resets in `) + `\d+ s`},
		{name: "429 token limit", args: append([]string{"http://gw.example/v1/chat/completions"}, chat...),
			prime: [][]string{append([]string{"http://gw.example/v1/chat/completions", "-H", "x-mock-completion-tokens: 50"}, chat...)},
			want:  q(`429 from route default/llm: localRateLimit[1] (50 tokens per minute) exhausted, resets in `) + `\d+ s`},
		{name: "429 global limit", global: true, args: []string{"http://gw.example/global", "-H", "x-user: " + user},
			prime: [][]string{{"http://gw.example/global", "-H", "x-user: " + user}},
			want: q(`429 from route default/global: remoteRateLimit: refused by the rate limit service `+rlsAddr+` (domain gwdiag-explain): {user=`+user+`} 1 request per day, 0 left, resets in `) +
				`\d+ s` + q(` (OVER_LIMIT)`)},
		{name: "503 backend down", args: []string{"http://gw.example/down"},
			want: q(`503 from route default/down: backend ` + down + ` could not be reached: dial tcp ` + down + `: connect: connection refused`)},
		{name: "502 body cut", args: []string{"http://gw.example/cut/1000"},
			want: q(`502 from route default/cut: backend ` + echoAddr + ` body cut short: unexpected EOF`)},
	}
	dir := t.TempDir()
	local := []string{"--local", "--admin-url", p.adminURL, "--port", strconv.Itoa(p.port), "--"}
	all := filepath.Join(dir, "all.jsonl")
	var wants []string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.global && rls == nil {
				t.Skipf("the global rate-limit service is not available here: %v", rlsErr)
			}
			for _, pr := range c.prime {
				if r := gwdiag(t, nil, nil, append([]string{"trace", "--raw"}, append(local, pr...)...)...); r.code != 0 {
					t.Fatalf("priming request: exit %d: %s", r.code, r.stderr)
				}
			}
			want := regexp.MustCompile("^" + c.want + "$")
			live := gwdiag(t, nil, nil, append([]string{"trace", "explain"}, append(local, c.args...)...)...)
			t.Logf("gwdiag trace explain -- %s\n%s", strings.Join(c.args, " "), live.stdout)
			if live.code != 0 || !want.MatchString(strings.TrimSpace(live.stdout)) {
				t.Errorf("live: exit %d\ngot  %s\nwant %s\nstderr: %s", live.code, live.stdout, c.want, live.stderr)
			}
			raw := gwdiag(t, nil, nil, append([]string{"trace", "--raw"}, append(local, c.args...)...)...)
			if raw.code != 0 {
				t.Fatalf("trace --raw: exit %d: %s", raw.code, raw.stderr)
			}
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
			if err := os.WriteFile(file, []byte(raw.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			appendFile(t, all, raw.stdout)
			wants = append(wants, c.want)
			rec := gwdiag(t, nil, nil, "trace", "explain", "-f", file)
			if rec.code != 0 || !want.MatchString(strings.TrimSpace(rec.stdout)) {
				t.Errorf("recorded: exit %d\ngot  %s\nwant %s\nstderr: %s", rec.code, rec.stdout, c.want, rec.stderr)
			}
			// The what-if agrees on the route, or on why none would take it.
			whatif := gwdiag(t, nil, nil, append([]string{"config", "explain"}, append(local, c.args...)...)...)
			first, _, _ := strings.Cut(whatif.stdout, "\n")
			if whatif.code != 0 || !whatifAgrees(first, strings.TrimSpace(live.stdout)) {
				t.Errorf("what-if: exit %d\ngot  %s\ntrace %s\nstderr: %s", whatif.code, first, live.stdout, whatif.stderr)
			}
		})
	}
	t.Run("watch mode", func(t *testing.T) {
		// Another client's requests, no route takes them by their method.
		r := watchSending(t, nil, func(int) {
			if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/submit/watched", p.port)); err == nil {
				resp.Body.Close()
			}
		}, "trace", "explain", "--local", "--admin-url", p.adminURL)
		want := "404: no route matched; closest, default/submit: method is GET, the route wants POST (7 routes on " + listener + ")\n"
		if r.code != 0 || r.stdout != want {
			t.Errorf("watch: exit %d\ngot  %q\nwant %q\nstderr: %s", r.code, r.stdout, want, r.stderr)
		}
	})
	t.Run("a capture of every request", func(t *testing.T) {
		r := gwdiag(t, nil, nil, "trace", "explain", "-f", all)
		got := lines(r.stdout)
		if r.code != 0 || len(got) != len(wants) {
			t.Fatalf("exit %d, %d lines for %d requests:\n%s%s", r.code, len(got), len(wants), r.stdout, r.stderr)
		}
		for i, w := range wants {
			prefix := ""
			if i > 0 {
				prefix = regexp.QuoteMeta(fmt.Sprintf("#%d: ", i+1))
			}
			if !regexp.MustCompile("^" + prefix + w + "$").MatchString(got[i]) {
				t.Errorf("line %d:\ngot  %s\nwant %s", i+1, got[i], w)
			}
		}
		// On stdin too, as an SSE capture would come.
		f, err := os.Open(all)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if in := gwdiag(t, nil, f, "trace", "explain", "-f", "-", "-o", "json"); in.code != 0 || len(lines(in.stdout)) != len(wants) ||
			!strings.Contains(in.stdout, `"cause":"rateLimit"`) {
			t.Errorf("stdin, -o json: exit %d:\n%s%s", in.code, in.stdout, in.stderr)
		}
	})
	t.Run("a saved dump", func(t *testing.T) {
		dump := filepath.Join(dir, "dump.json")
		r := gwdiag(t, nil, nil, "config", "all", "--local", "--admin-url", p.adminURL, "-o", "json")
		if r.code != 0 {
			t.Fatalf("config all: exit %d: %s", r.code, r.stderr)
		}
		if err := os.WriteFile(dump, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		w := gwdiag(t, nil, nil, "config", "explain", "-f", dump, "--port", strconv.Itoa(p.port), "--", "http://gw.example/submit")
		if !strings.HasPrefix(w.stdout, "404: no route matched; closest, default/submit: method is GET, the route wants POST") {
			t.Errorf("what-if from a saved dump: exit %d:\n%s%s", w.code, w.stdout, w.stderr)
		}
		w = gwdiag(t, nil, nil, "config", "explain", "-f", dump, "--", "http://gw.example/v1/chat/completions", "-X", "POST")
		for _, want := range []string{
			"would take route default/llm to ai backend default/openai -> " + llmAddr + " (1 endpoint); policies: localRateLimit",
			"localRateLimit (inline): [0] 100 requests per minute; [1] 50 tokens per minute",
			`not taken: default/default/bind/0/listener0/default/submit: path "/v1/chat/completions" does not match prefix "/submit"`,
		} {
			if !strings.Contains(w.stdout, want) {
				t.Errorf("what-if lacks %q:\n%s%s", want, w.stdout, w.stderr)
			}
		}
	})
}

// whatifAgrees: a what-if's first line and a trace's verdict name the
// same route, or the same reason no route took the request.
func whatifAgrees(whatif, traced string) bool {
	if strings.HasPrefix(traced, "404: ") {
		return whatif == traced
	}
	route := regexp.MustCompile(`^\d+ from route (\S+):`).FindStringSubmatch(traced)
	return route != nil && strings.HasPrefix(whatif, "would take route "+route[1]+" ")
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// startExplainLimits starts the real global rate-limit service
// (envoyproxy/ratelimit on redis-server) until the test ends; nil and why
// when it cannot be built here.
func startExplainLimits(t *testing.T) (*ratelimitsvc.Service, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := ratelimitsvc.Start(ctx, ratelimitsvc.Options{Config: map[string]string{"explain.yaml": explainLimits}})
	if errors.Is(err, toolbin.ErrNoNetwork) || errors.Is(err, ratelimitsvc.ErrNoRedis) {
		return nil, err
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, nil
}

// TestVerdictInTmux: the viewer, in a real terminal, shows the verdict
// above the event list: a request no route takes, by method.
func TestVerdictInTmux(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(echo.Close)
	p := startProxyYAML(t, fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - routes:
    - name: submit
      matches: [{path: {pathPrefix: /submit}, method: POST}]
      backends: [{host: "%s"}]
`, echo.Listener.Addr().String()))
	s := newTmux(t, fmt.Sprintf("%s trace --local --admin-url %s --port %d -- http://tmux.example/submit", gwdiagBin, p.adminURL, p.port))
	scr := s.waitScreen("stream complete, press q to exit", "Verdict: 404: no route matched: default/submit: method is GET, the route")
	rows := strings.Split(scr, "\n")
	if len(rows) < 3 || !strings.HasPrefix(rows[1], "Verdict: 404") || !strings.Contains(rows[2], "Type") {
		t.Errorf("want the verdict on the second row, above the event list:\n%s", scr)
	}
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("exit status %d after q, want 0; screen:\n%s", code, s.screen())
	}
}
