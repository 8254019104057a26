package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/gwdiag/gwdiag/cli/inject"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
)

// The credentials planted in requests, responses and the config: unique
// strings, so that finding one anywhere is a leak. plantShortKey is
// shorter than redact.MinSubstring: scrubbed only where a whole string is
// it, so every sentence that quotes it must have been built with it
// redacted.
const (
	plantBearer      = "sk-plant-bearer-7f3a91c2e4"
	plantWrongBearer = "sk-plant-wrong-5c0d9e8b1a"
	plantProxyCreds  = "cGxhbnQtcHJveHk6cHctOWQ0ZQ=="
	plantSession     = "plant-cookie-5b8e20d1c7"
	plantTheme       = "plant-theme-0a61"
	// plantShortCookie, short, is found by no scrubbing inside the
	// cookie header: only the header's own redaction hides it.
	plantShortCookie  = "Qj_3"
	plantXAPIKey      = "plant-xapikey-3c9d7e1f"
	plantShortKey     = "ZQ_k" // + the run's digit: each of three runs has its own bucket
	plantAzureKey     = "plant-azure-2e5f8a0b"
	plantGoogKey      = "plant-goog-9b1c4d7e"
	plantTenantToken  = "plant-tenant-6d2a8f3c"
	plantSetCookie    = "plant-setcookie-4e7b0c9a"
	plantProviderKey  = "sk-plant-provider-1a2b3c4d5e"
	plantBackendToken = "plant-backendtoken-8e1f"
	plantConfigCookie = "plant-cfgcookie-3b7d"
	plantMalformed    = "plant-malformed-6a2c"
	plantGuardKey     = "plant-guard-key-5d1e"
	// plantQueryKey and plantShortQuery are credentials in a request's
	// query (Gemini's ?key=, an OAuth access_token): the short one is
	// found by no scrubbing inside the URI, only by the query's own
	// redaction.
	plantQueryKey   = "AIzaSyPlantQueryKey0c4f9e"
	plantShortQuery = "Qt_7"
	// plantLateCookie is a cookie the backend issues that the client had
	// put in its query: see TestTracesNeverShowCredentials.
	plantLateCookie = "plant-late-issued-cookie-77aa"
)

// plantedSecrets are every planted credential but plantLateCookie.
var plantedSecrets = []string{
	plantBearer, plantWrongBearer, plantProxyCreds, plantSession, plantTheme, plantShortCookie, plantXAPIKey,
	plantShortKey + "0", plantShortKey + "1", plantShortKey + "2", plantShortKey + "3",
	plantAzureKey, plantGoogKey, plantTenantToken, plantSetCookie, plantProviderKey, plantBackendToken,
	plantConfigCookie, plantMalformed, plantGuardKey, plantQueryKey, plantShortQuery,
}

// credentialHeaders are the headers every planted request carries: each
// default credential header, and one of config.sensitiveHeaders.
func credentialHeaders(bearer, apiKey string) []string {
	return []string{
		"Authorization", "Bearer " + bearer,
		"Proxy-Authorization", "Basic " + plantProxyCreds,
		"Cookie", "session=" + plantSession + "; theme=" + plantTheme + "; s=" + plantShortCookie,
		"X-Api-Key", apiKey,
		"Api-Key", plantAzureKey,
		"X-Goog-Api-Key", plantGoogKey,
		"X-Tenant-Token", plantTenantToken,
	}
}

// plantConfig routes every kind of request a trace explains: a keyed
// local limit (beside a route that wants another x-api-key, so that its
// reason quotes the request's) and a global one keyed by x-api-key, a
// route matched on an authorization (and, on a second bind, one no
// request with another token gets), header modifiers setting a backend's Authorization and a
// Set-Cookie, an unreachable and a malformed backend, and an llm model
// whose provider key refproxy sends.
const plantConfig = `
config:
  sensitiveHeaders: [x-tenant-token]
binds:
- port: 0
  listeners:
  - routes:
    - name: guard
      matches: [{path: {pathPrefix: /keyed}, headers: [{name: X-Api-Key, value: {exact: "{{.GuardKey}}"}}]}]
      backends: [{host: "{{.Echo}}"}]
    - name: keyed
      matches: [{path: {pathPrefix: /keyed}}]
      policies:
        localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1h, key: 'request.headers["x-api-key"]'}]
      backends: [{host: "{{.Echo}}"}]
    - name: global
      matches: [{path: {pathPrefix: /global}}]
      policies:
        remoteRateLimit:
          host: "{{.RLS}}"
          domain: plant
          descriptors:
          - entries: [{key: user, value: 'request.headers["x-api-key"]'}]
      backends: [{host: "{{.Echo}}"}]
    - name: unevaluable
      matches: [{path: {pathPrefix: /unevaluable}}]
      policies:
        remoteRateLimit:
          host: "{{.RLS}}"
          domain: plant
          # Fails with CEL's "no such key: <the Authorization value>".
          descriptors:
          - entries: [{key: user, value: 'string({"a": 1}[request.headers["authorization"]])'}]
      backends: [{host: "{{.Echo}}"}]
    - name: admin
      matches: [{path: {pathPrefix: /admin}, headers: [{name: authorization, value: {exact: "Bearer {{.Bearer}}"}}]}]
      backends: [{host: "{{.Echo}}"}]
    - name: modified
      matches: [{path: {pathPrefix: /modified}}]
      policies:
        requestHeaderModifier: {set: {authorization: "Bearer {{.BackendToken}}"}}
        responseHeaderModifier: {set: {set-cookie: "cfg={{.ConfigCookie}}; Path=/"}}
      backends: [{host: "{{.Echo}}"}]
    - name: down
      matches: [{path: {pathPrefix: /down}}]
      backends: [{host: "127.0.0.1:1"}]
    - name: malformed
      matches: [{path: {pathPrefix: /malformed}}]
      backends: [{host: "{{.Malformed}}"}]
    - name: echo
      backends: [{host: "{{.Echo}}"}]
- port: 0
  listeners:
  - routes:
    - name: admin-only
      matches: [{path: {pathPrefix: /}, headers: [{name: authorization, value: {exact: "Bearer {{.Bearer}}"}}]}]
      backends: [{host: "{{.Echo}}"}]
llm:
  port: 0
  models:
  - name: plant
    provider: openAI
    params: {hostOverride: "{{.AI}}", apiKey: "{{.ProviderKey}}"}
`

// plantEnv is a proxy for plantConfig in front of its backends, its logs
// kept.
type plantEnv struct {
	proxy *refproxy.Proxy
	logs  *lockedBuffer
	// main, other and llm are the binds' base URLs.
	main, other, llm string
}

// startPlanted starts plantConfig's backends and a proxy (with opts)
// until the test ends:
//   - Echo answers with a Set-Cookie (plantSetCookie, or the query's
//     issue), and copies the Authorization it got into X-Echo-Auth, a
//     header no redaction rule knows;
//   - AI, an OpenAI-style provider, copies the Authorization it got (the
//     provider key) into X-Seen-Authorization;
//   - Malformed answers a head with a Set-Cookie that cannot be read;
//   - RLS, a global rate-limit service, refuses every request.
func startPlanted(t *testing.T, opts ...refproxy.Option) *plantEnv {
	t.Helper()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cookie := plantSetCookie
		if v := r.URL.Query().Get("issue"); v != "" {
			cookie = v
		}
		w.Header().Add("Set-Cookie", "session="+cookie+"; Path=/; HttpOnly")
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "echo %s\n", r.URL.Path)
	}))
	t.Cleanup(echo.Close)
	ai := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"plant","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(ai.Close)
	malformed := rawBackend(t, "HTTP/1.1 200 OK\r\nSet-Cookie: session="+plantMalformed+"\r\nContent-Length: not-a-number\r\n\r\n")
	rls := refusingRateLimitService(t)

	var cfg bytes.Buffer
	r := strings.NewReplacer("{{.Echo}}", strings.TrimPrefix(echo.URL, "http://"), "{{.AI}}", strings.TrimPrefix(ai.URL, "http://"),
		"{{.Malformed}}", malformed, "{{.RLS}}", rls, "{{.Bearer}}", plantBearer, "{{.BackendToken}}", plantBackendToken,
		"{{.ConfigCookie}}", plantConfigCookie, "{{.ProviderKey}}", plantProviderKey, "{{.GuardKey}}", plantGuardKey)
	cfg.WriteString(r.Replace(plantConfig))
	logs := &lockedBuffer{}
	p := refproxytest.Start(t, cfg.String(), append([]refproxy.Option{refproxy.WithLogOutput(logs), refproxy.WithLogFilter("trace")}, opts...)...)
	addrs := p.BindAddrs()
	if len(addrs) != 3 {
		t.Fatalf("binds %v, want the two binds and the llm port", addrs)
	}
	return &plantEnv{proxy: p, logs: logs, main: "http://" + addrs[0], other: "http://" + addrs[1], llm: "http://" + addrs[2]}
}

// rawBackend answers every connection with the bytes of resp, whatever it
// was sent, and closes it.
func rawBackend(t *testing.T, resp string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				io.WriteString(c, resp)
			}()
		}
	}()
	return ln.Addr().String()
}

// refusingService is a global rate-limit service that refuses everything.
type refusingService struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (refusingService) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OVER_LIMIT}}}, nil
}

func refusingRateLimitService(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, refusingService{})
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// lockedBuffer is a bytes.Buffer several goroutines write (logs).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// rawStream is a /debug/trace stream's every byte, as it came.
type rawStream struct {
	name string
	mu   sync.Mutex
	b    bytes.Buffer
	done chan struct{}
}

// openRaw opens /debug/trace with q (method POST, or GET without a
// query, as a plain watcher does), returns once the watcher is registered
// (": ready"), and keeps every byte until the stream ends.
func openRaw(t *testing.T, p *refproxy.Proxy, name, method string, q url.Values) *rawStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	u := "http://" + p.AdminAddr() + "/debug/trace"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, _ := http.NewRequestWithContext(ctx, method, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: /debug/trace answered %d %s", name, resp.StatusCode, b)
	}
	return keepRaw(t, name, resp.Body)
}

// keepRaw reads body up to its ": ready" comment, then keeps reading it
// until it ends.
func keepRaw(t *testing.T, name string, body io.ReadCloser) *rawStream {
	t.Helper()
	s := &rawStream{name: name, done: make(chan struct{})}
	br := bufio.NewReader(body)
	for {
		line, err := br.ReadString('\n')
		s.b.WriteString(line)
		if err != nil {
			t.Fatalf("%s: the stream ended before it was ready: %v", name, err)
		}
		if line == ": ready\n" {
			break
		}
	}
	go func() {
		defer close(s.done)
		defer body.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := br.Read(buf)
			s.mu.Lock()
			s.b.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// wait waits for the stream's end and returns its bytes.
func (s *rawStream) wait(t *testing.T) []byte {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: the stream did not end", s.name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// events are the trace events of a stream's bytes.
func events(t *testing.T, name string, b []byte) []trace.Event {
	t.Helper()
	var out []trace.Event
	r := sse.NewReader(bytes.NewReader(b))
	for {
		f, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Comment != "" || len(f.Data) == 0 {
			continue
		}
		e, err := trace.Parse([]byte(f.Data))
		if err != nil {
			t.Fatalf("%s: %v: %s", name, err, f.Data)
		}
		out = append(out, e)
	}
}

// plantRequest is one request of the planted run.
type plantRequest struct {
	name, base, method, path, body string
	hdr                            []string
	// status is what the client must get (the path the trace explains).
	status int
}

// plantRequests drive every path a trace explains, each request carrying
// every credential header; run (0 to 3) picks the short key, so that each
// run has a bucket of its own.
func (e *plantEnv) plantRequests(run int) []plantRequest {
	all := credentialHeaders(plantBearer, plantXAPIKey)
	short := credentialHeaders(plantBearer, fmt.Sprint(plantShortKey, run))
	wrong := credentialHeaders(plantWrongBearer, plantXAPIKey)
	chat := append([]string{"Content-Type", "application/json"}, all...)
	return []plantRequest{
		{"forwarded", e.main, http.MethodGet, "/get?q=1&key=" + plantQueryKey + "&access_token=" + plantShortQuery, "", all, http.StatusOK},
		{"keyed limit, admitted", e.main, http.MethodGet, "/keyed", "", short, http.StatusOK},
		{"keyed limit, refused", e.main, http.MethodGet, "/keyed", "", short, http.StatusTooManyRequests},
		{"global limit, refused", e.main, http.MethodGet, "/global", "", short, http.StatusTooManyRequests},
		{"global limit, descriptor not evaluated", e.main, http.MethodGet, "/unevaluable", "", all, http.StatusInternalServerError},
		{"route matched on authorization", e.main, http.MethodGet, "/admin", "", all, http.StatusOK},
		{"route not matched on authorization", e.main, http.MethodGet, "/admin", "", wrong, http.StatusOK},
		{"no route, authorization", e.other, http.MethodGet, "/", "", wrong, http.StatusNotFound},
		{"header modifiers", e.main, http.MethodGet, "/modified", "", all, http.StatusOK},
		{"backend unreachable", e.main, http.MethodGet, "/down", "", all, http.StatusServiceUnavailable},
		{"backend malformed", e.main, http.MethodGet, "/malformed", "", all, http.StatusBadGateway},
		{"llm route", e.llm, http.MethodPost, "/v1/chat/completions?key=" + plantQueryKey, `{"model":"plant","messages":[{"role":"user","content":"hi"}]}`, chat, http.StatusOK},
	}
}

// send sends r with net/http.
func (r plantRequest) send(t *testing.T) {
	t.Helper()
	req, err := http.NewRequest(r.method, r.base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(r.hdr); i += 2 {
		req.Header.Set(r.hdr[i], r.hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != r.status {
		t.Fatalf("%s: status %d, want %d", r.name, resp.StatusCode, r.status)
	}
}

// inject sends r as gwdiag's inject mode does (`gwdiag trace --local
// --port P -- URL -H ...`: its built-in curl).
func (r plantRequest) inject(t *testing.T) {
	t.Helper()
	args := []string{r.base + r.path, "-X", r.method}
	for i := 0; i+1 < len(r.hdr); i += 2 {
		args = append(args, "-H", r.hdr[i]+": "+r.hdr[i+1])
	}
	if r.body != "" {
		args = append(args, "-d", r.body)
	}
	req, err := inject.ParseArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (inject.Builtin{}).Send(t.Context(), req, strings.TrimPrefix(r.base, "http://")); err != nil {
		t.Fatalf("%s: inject: %v", r.name, err)
	}
}

// TestTracesNeverShowCredentials: credentials planted in every header
// that carries one (of requests and responses), in the config (a
// provider's API key, header modifiers' values) and echoed by backends
// where no redaction rule looks, never appear in any byte refproxy writes:
// every trace stream (one-shot watchers, plain, CEL-filtered and
// injected; follow streams, plain, CEL-filtered and with an outcome
// filter; and a trace held for an outcome filter alone, rendered at its
// end), /config_dump and its logs (at the most verbose level), over
// every path a trace explains (a forwarded request, a keyed local limit
// admitting and refusing, a global limit refusing, a route matched and
// not matched on an authorization, no route, header modifiers, a backend
// unreachable and one answering garbage, an llm route). The traces still
// say where each credential was (its header, its scheme, its cookie's
// name, a fingerprint).
//
// The order of redaction: a cookie the backend issues that the client
// had sent in its query (plantLateCookie) becomes a secret of the trace
// only when the response comes. A held trace (an outcome filter's) is
// rendered at its end, so even its initial snapshot is scrubbed of it; a
// live stream has sent its earlier frames already, and shows it only
// there, in the query it came in.
func TestTracesNeverShowCredentials(t *testing.T) {
	e := startPlanted(t)
	late := plantRequest{"a cookie the client had", e.main, http.MethodGet, "/late?issue=" + plantLateCookie, "",
		credentialHeaders(plantBearer, plantXAPIKey), http.StatusOK}
	total := 3*len(e.plantRequests(0)) + 1
	follow := func(extra ...string) url.Values {
		q := url.Values{"follow": {"true"}, "max": {fmt.Sprint(total)}, "duration": {"2m"}}
		for i := 0; i+1 < len(extra); i += 2 {
			q.Set(extra[i], extra[i+1])
		}
		return q
	}
	followAll := openRaw(t, e.proxy, "follow", http.MethodPost, follow())
	outcome := openRaw(t, e.proxy, "follow, outcome filter", http.MethodPost, follow("outcome", "response.code >= 0"))
	filtered := openRaw(t, e.proxy, "follow, CEL filter", http.MethodPost, follow("expression", `request.method != "TRACE"`))

	// A filter sees credentials as traces show them: this one takes
	// every request here, and none if it saw them in clear.
	const redactedFilter = `request.headers["authorization"].startsWith("Bearer <redacted:") && request.headers["x-api-key"].startsWith("<redacted:")`
	var oneShots []*rawStream
	for _, r := range e.plantRequests(0) {
		w := openRaw(t, e.proxy, r.name+", one-shot", http.MethodGet, nil)
		r.send(t)
		oneShots = append(oneShots, w)
		w.wait(t)
	}
	for _, r := range e.plantRequests(1) {
		w := openRaw(t, e.proxy, r.name+", one-shot, CEL filter", http.MethodPost, url.Values{"expression": {redactedFilter}})
		r.send(t)
		oneShots = append(oneShots, w)
		w.wait(t)
	}
	for _, r := range e.plantRequests(2) {
		st, err := sse.Open(t.Context(), http.DefaultClient, e.proxy.AdminAddr(), "")
		if err != nil {
			t.Fatal(err)
		}
		w := keepRaw(t, r.name+", injected", st.Response.Body)
		r.inject(t)
		oneShots = append(oneShots, w)
		w.wait(t)
	}
	lateShot := openRaw(t, e.proxy, late.name+", one-shot", http.MethodGet, nil)
	late.send(t)
	streams := map[string][]byte{}
	for _, s := range append(oneShots, followAll, outcome, filtered, lateShot) {
		streams[s.name] = s.wait(t)
	}

	// Only an outcome filter follows: each trace is held, and rendered
	// when the filter keeps it, at its end.
	heldQuery := follow("outcome", "response.code >= 0")
	heldQuery.Set("max", fmt.Sprint(len(e.plantRequests(3))+1))
	held := openRaw(t, e.proxy, "follow, held for an outcome filter", http.MethodPost, heldQuery)
	for _, r := range e.plantRequests(3) {
		r.send(t)
	}
	late.send(t)
	streams[held.name] = held.wait(t)
	dump := adminGet(t, e.proxy, "/config_dump")
	logs := e.logs.Bytes()

	// Every byte written, searched for every credential, as it is and as
	// JSON escapes it.
	everything := map[string][]byte{"/config_dump": dump, "logs": logs}
	for name, b := range streams {
		everything[name] = b
	}
	for name, b := range everything {
		for _, s := range plantedSecrets {
			j, _ := json.Marshal(s)
			if bytes.Contains(b, []byte(s)) || bytes.Contains(b, j[1:len(j)-1]) {
				at := bytes.Index(b, []byte(s))
				t.Errorf("%s shows %q: ...%s...", name, s, b[max(0, at-200):min(len(b), at+100)])
			}
		}
	}

	// The late cookie: never in a held trace, nor in any event from the
	// response on; a live stream showed it only in the query it came in.
	if bytes.Contains(streams[held.name], []byte(plantLateCookie)) {
		t.Errorf("the held trace shows the cookie the backend issued, which the client had in its query")
	}
	for _, name := range []string{followAll.name, filtered.name, lateShot.name} {
		for _, ev := range events(t, name, streams[name]) {
			if ev.Type() == trace.RequestStarted || ev.Type() == trace.RequestSnapshot || ev.Type() == trace.RouteSelection || ev.Type() == trace.PolicySelection {
				continue
			}
			if b, _ := json.Marshal(ev); bytes.Contains(b, []byte(plantLateCookie)) {
				t.Errorf("%s: %s, after the response, shows the cookie the backend issued: %s", name, ev.Type(), b)
			}
		}
	}

	// Not vacuous: every stream traced what it should, each request to
	// its end, and shows where the credentials were.
	wantTraced := map[string]int{followAll.name: total, outcome.name: total, filtered.name: total, held.name: len(e.plantRequests(3)) + 1}
	for _, s := range oneShots {
		wantTraced[s.name] = 1
	}
	wantTraced[lateShot.name] = 1
	for name, want := range wantTraced {
		evs := events(t, name, streams[name])
		finished := 0
		for _, ev := range evs {
			if ev.Type() == trace.RequestFinished {
				finished++
			}
		}
		if finished != want {
			t.Errorf("%s: %d requests traced to their end, want %d", name, finished, want)
		}
		checkShownRedacted(t, name, evs)
	}
	for _, want := range []string{`"\u003credacted:`, `Bearer \u003credacted:`, `session=\u003credacted:`, `theme=\u003credacted:`, `; Path=/; HttpOnly`} {
		if !bytes.Contains(streams[followAll.name], []byte(want)) {
			t.Errorf("the follow stream lacks %s: credentials are not shown redacted where they were", want)
		}
	}
	for _, want := range []string{`"authorization": "<redacted>"`, `"set-cookie": "<redacted>"`} {
		if !bytes.Contains(dump, []byte(want)) {
			t.Errorf("/config_dump lacks %s", want)
		}
	}
	if !bytes.Contains(logs, []byte("backend call failed")) {
		t.Errorf("the logs lack the backend's failures (debug): the search of the logs searched little\n%s", logs)
	}
}

// checkShownRedacted: the snapshots of a trace show every credential
// header they have redacted, and the events that quote a request's
// value (a keyed bucket, a descriptor, a route's got) show a marker.
func checkShownRedacted(t *testing.T, name string, evs []trace.Event) {
	t.Helper()
	for _, ev := range evs {
		st, _ := ev.Message["requestState"].(map[string]any)
		for _, part := range []string{"request", "response"} {
			m, _ := st[part].(map[string]any)
			hs, _ := m["headers"].(map[string]any)
			for k, v := range hs {
				s, _ := v.(string)
				switch k {
				case "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-goog-api-key", "x-tenant-token":
					if !redact.HasMarker(s) {
						t.Errorf("%s: %s %s: %s %q, want it redacted", name, ev.Type(), ev.Stage(), k, s)
					}
				}
			}
		}
		b, _ := json.Marshal(ev.Message)
		for _, quoted := range []string{`"bucket":"`, `"got":"Bearer `, `"user":"`} {
			if i := bytes.Index(b, []byte(quoted)); i >= 0 && !bytes.HasPrefix(b[i+len(quoted):], []byte(`\u003credacted:`)) {
				t.Errorf("%s: %s quotes a request's credential unredacted: %s", name, ev.Type(), b[i:min(len(b), i+60)])
			}
		}
	}
}

// adminGet is the body of an admin endpoint.
func adminGet(t *testing.T, p *refproxy.Proxy, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + p.AdminAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
	}
	return b
}

// fingerprintRE finds a marker's fingerprint.
var fingerprintRE = regexp.MustCompile(`<redacted:([0-9a-f]{12})>`)

// oneShotTrace traces one request sent with hdr to path with a one-shot
// watcher.
func oneShotTrace(t *testing.T, p *refproxy.Proxy, base, path string, hdr ...string) []trace.Event {
	t.Helper()
	w := openRaw(t, p, path, http.MethodGet, nil)
	plantRequest{name: path, base: base, method: http.MethodGet, path: path, hdr: hdr, status: http.StatusOK}.send(t)
	return events(t, path, w.wait(t))
}

// initialHeader is a header of the initial snapshot of evs.
func initialHeader(evs []trace.Event, name string) string {
	for _, ev := range evs {
		if ev.Type() == trace.RequestSnapshot && ev.Stage() == trace.StageInitialRequest {
			st, _ := ev.Message["requestState"].(map[string]any)
			req, _ := st["request"].(map[string]any)
			hs, _ := req["headers"].(map[string]any)
			s, _ := hs[name].(string)
			return s
		}
	}
	return ""
}

// TestFingerprintsTellCredentialsApart: two requests with the same key
// show the same fingerprint, a request with another key another one, and
// a config reload keeps them (one key per process).
func TestFingerprintsTellCredentialsApart(t *testing.T) {
	e := startPlanted(t)
	fp := func(v string) string {
		m := fingerprintRE.FindStringSubmatch(v)
		if m == nil {
			t.Fatalf("%q holds no fingerprint", v)
		}
		return m[1]
	}
	a1 := fp(initialHeader(oneShotTrace(t, e.proxy, e.main, "/get", "X-Api-Key", "plant-key-a-0001"), "x-api-key"))
	a2 := fp(initialHeader(oneShotTrace(t, e.proxy, e.main, "/get", "X-Api-Key", "plant-key-a-0001"), "x-api-key"))
	b := fp(initialHeader(oneShotTrace(t, e.proxy, e.main, "/get", "X-Api-Key", "plant-key-b-0002"), "x-api-key"))
	if a1 != a2 || a1 == b {
		t.Errorf("fingerprints: key a %s then %s, key b %s; want a's the same, b's another", a1, a2, b)
	}
	// The same key in another header, with a scheme: the same fingerprint.
	if auth := fp(initialHeader(oneShotTrace(t, e.proxy, e.main, "/get", "Authorization", "Bearer plant-key-a-0001"), "authorization")); auth != a1 {
		t.Errorf("the key as a bearer token: fingerprint %s, want x-api-key's %s", auth, a1)
	}
	if err := e.proxy.Reload(e.proxy.Config()); err != nil {
		t.Fatal(err)
	}
	if again := fp(initialHeader(oneShotTrace(t, e.proxy, e.main, "/get", "X-Api-Key", "plant-key-a-0001"), "x-api-key")); again != a1 {
		t.Errorf("after a reload, key a's fingerprint %s, want %s", again, a1)
	}
}

// TestTraceCredentialsInClear: with the credentials shown in clear
// (--trace-credentials-in-clear), a trace shows the default credential
// headers and the provider key as they are, config.sensitiveHeaders stay
// redacted, the proxy says so at start, and /config_dump still shows no
// secret of the config.
func TestTraceCredentialsInClear(t *testing.T) {
	e := startPlanted(t, refproxy.WithTraceCredentialsInClear(true))
	evs := oneShotTrace(t, e.proxy, e.main, "/get", credentialHeaders(plantBearer, plantXAPIKey)...)
	for h, want := range map[string]string{"authorization": "Bearer " + plantBearer, "x-api-key": plantXAPIKey, "cookie": "session=" + plantSession + "; theme=" + plantTheme + "; s=" + plantShortCookie} {
		if got := initialHeader(evs, h); got != want {
			t.Errorf("in clear: %s %q, want %q", h, got, want)
		}
	}
	if got := initialHeader(evs, "x-tenant-token"); !redact.IsMarker(got) {
		t.Errorf("in clear: x-tenant-token (config.sensitiveHeaders) %q, want it redacted", got)
	}
	w := openRaw(t, e.proxy, "llm", http.MethodGet, nil)
	plantRequest{"llm", e.llm, http.MethodPost, "/v1/chat/completions", `{"model":"plant","messages":[]}`,
		[]string{"Content-Type", "application/json"}, http.StatusOK}.send(t)
	if b := w.wait(t); !bytes.Contains(b, []byte("Bearer "+plantProviderKey)) {
		t.Errorf("in clear: the provider key the backend echoed is not shown:\n%s", b)
	}
	if !bytes.Contains(e.logs.Bytes(), []byte("credentials in clear")) {
		t.Errorf("no warning at start:\n%s", e.logs.Bytes())
	}
	dump := adminGet(t, e.proxy, "/config_dump")
	for _, s := range []string{plantBackendToken, plantConfigCookie, plantProviderKey} {
		if bytes.Contains(dump, []byte(s)) {
			t.Errorf("/config_dump shows %q", s)
		}
	}
}
