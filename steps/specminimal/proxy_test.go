package specminimal

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backend is the upstream of the tests: /status/{code} answers that code,
// /echo echoes the request, /llm/json is an LLM answer with ?tokens= of
// usage, /llm/stream an LLM event stream whose last chunk before [DONE]
// carries ?tokens= of usage (and, with ?hold=1, waits for release before
// that last [DONE] chunk).
type backend struct {
	addr    string
	hits    sync.Map // path -> *atomic.Int64
	release chan struct{}

	mu       sync.Mutex
	lastBody []byte
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.PathValue("code"))
		if err != nil {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "host": r.Host, "uri": r.RequestURI, "body": string(body)})
	})
	mux.HandleFunc("/llm/json", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("tokens"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, n/2, n-n/2, n)
	})
	mux.HandleFunc("/llm/stream", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.lastBody = body
		b.mu.Unlock()
		n, _ := strconv.Atoi(r.URL.Query().Get("tokens"))
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, chunk := range []string{
			`{"choices":[{"delta":{"content":"hel"}}],"usage":null}`,
			`{"choices":[{"delta":{"content":"lo"}}],"usage":null}`,
			fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, n/2, n-n/2, n),
		} {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
			_ = rc.Flush()
		}
		if r.URL.Query().Get("hold") == "1" {
			select {
			case <-b.release:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := b.hits.LoadOrStore(r.URL.Path, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.addr = strings.TrimPrefix(srv.URL, "http://")
	return b
}

// hitsOf is how many requests for path reached the backend.
func (b *backend) hitsOf(path string) int64 {
	c, ok := b.hits.Load(path)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

// refusedAddr is a loopback host:port nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// client gives up after 10s, so that a proxy that never answers fails a
// test instead of hanging it.
var client = &http.Client{Timeout: 10 * time.Second}

func startProxy(t *testing.T, cfg Config) *Proxy {
	t.Helper()
	p, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func listenerURL(t *testing.T, p *Proxy, name string) string {
	t.Helper()
	addr, err := p.ListenerAddr(name)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// answer is a response read whole.
type answer struct {
	code   int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, host, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func get(t *testing.T, url string) answer { return do(t, http.MethodGet, url, "", "") }

func TestRouting(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{
		{Name: "main", Routes: []Route{
			{Name: "status", PathPrefix: "/status/", Backend: b.addr},
			{Name: "echo", PathPrefix: "/echo", Backend: b.addr},
		}},
		{Name: "down", Routes: []Route{{Name: "gone", PathPrefix: "/", Backend: refusedAddr(t)}}},
	}})
	main, down := listenerURL(t, p, "main"), listenerURL(t, p, "down")
	for _, tc := range []struct {
		name, url, host string
		want            int
		wantBody        string // a part of the body, if set
	}{
		{"first matching route", main + "/status/418", "", http.StatusTeapot, ""},
		{"client's Host header goes on", main + "/echo?q=1", "api.example.test", http.StatusOK, `"host":"api.example.test"`},
		{"query goes on", main + "/echo?q=1", "", http.StatusOK, `"uri":"/echo?q=1"`},
		{"no route", main + "/nothing", "", http.StatusNotFound, ""},
		{"backend refuses the connection", down + "/anything", "", http.StatusBadGateway, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := do(t, http.MethodGet, tc.url, tc.host, "")
			if got.code != tc.want {
				t.Errorf("status: got %d, want %d (body %q)", got.code, tc.want, got.body)
			}
			if !strings.Contains(got.body, tc.wantBody) {
				t.Errorf("body: got %q, want it to contain %q", got.body, tc.wantBody)
			}
			for k := range got.header {
				if strings.HasPrefix(strings.ToLower(k), "x-ratelimit") {
					t.Errorf("header %s on a route without limits", k)
				}
			}
		})
	}
	if _, err := p.ListenerAddr("nope"); err == nil {
		t.Errorf("ListenerAddr(nope): got no error, want one")
	}
}

// checkRefusal checks a 429 of a local limit whose ceiling is limit.
func checkRefusal(t *testing.T, got answer, limit string, window time.Duration) {
	t.Helper()
	if got.code != http.StatusTooManyRequests {
		t.Fatalf("status: got %d, want 429", got.code)
	}
	if got.body != "rate limit exceeded" {
		t.Errorf("body: got %q, want %q", got.body, "rate limit exceeded")
	}
	if ct := got.header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type: got %q, want application/octet-stream", ct)
	}
	if l := got.header.Get("X-Ratelimit-Limit"); l != limit {
		t.Errorf("x-ratelimit-limit: got %q, want %q", l, limit)
	}
	if r := got.header.Get("X-Ratelimit-Remaining"); r != "0" {
		t.Errorf("x-ratelimit-remaining: got %q, want 0", r)
	}
	reset := got.header.Get("X-Ratelimit-Reset")
	secs, err := strconv.ParseFloat(reset, 64)
	if !regexp.MustCompile(`^\d+\.\d$`).MatchString(reset) || err != nil || secs < 0 || secs > window.Seconds() {
		t.Errorf("x-ratelimit-reset: got %q, want seconds with one decimal within %v", reset, window)
	}
	for k := range got.header {
		if strings.HasSuffix(strings.ToLower(k), "-ratelimited") {
			t.Errorf("header %s on a local limit's 429", k)
		}
	}
}

func TestRequestLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limits    []Limit
		want      []int  // statuses of the requests in turn
		wantLimit string // x-ratelimit-limit of every 429: the limit that refused
	}{
		{"2 per minute plus burst 1", []Limit{{Amount: 2, Burst: 1, Unit: time.Minute}}, []int{200, 200, 200, 429, 429}, "3"},
		{"every limit must pass", []Limit{{Amount: 10, Unit: time.Hour}, {Amount: 1, Unit: time.Minute}}, []int{200, 429}, "1"},
		// A refused request consumes nothing: the minute's 1 refuses the
		// second request, which the hour's 2 must not have counted, or the
		// hour would refuse the third.
		{"a refused request counts nowhere", []Limit{{Amount: 2, Unit: time.Hour}, {Amount: 1, Unit: time.Minute}}, []int{200, 429, 429, 429}, "1"},
		{"zero admits nothing", []Limit{{Amount: 0, Unit: time.Second}}, []int{429}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBackend(t)
			p := startProxy(t, Config{Listeners: []Listener{{Name: "l", Routes: []Route{
				{Name: "limited", PathPrefix: "/", Backend: b.addr, Limits: tc.limits}}}}})
			url := listenerURL(t, p, "l") + "/echo"
			var got []int
			for i := range tc.want {
				a := get(t, url)
				got = append(got, a.code)
				if a.code == http.StatusTooManyRequests {
					checkRefusal(t, a, tc.wantLimit, time.Hour)
				}
				if a.code == http.StatusOK {
					for k := range a.header {
						if strings.HasPrefix(strings.ToLower(k), "x-ratelimit") {
							t.Errorf("request %d: header %s on an allowed response", i, k)
						}
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("statuses: got %v, want %v", got, tc.want)
			}
			wantHits := int64(strings.Count(fmt.Sprint(tc.want), "200"))
			if h := b.hitsOf("/echo"); h != wantHits {
				t.Errorf("backend hits: got %d, want %d (a refused request is not forwarded)", h, wantHits)
			}
		})
	}
}

// TestWindowResets: a budget exhausted in a window of a second is restored
// when the window ends, after the x-ratelimit-reset the 429 announced.
func TestWindowResets(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{{Name: "l", Routes: []Route{
		{Name: "r", PathPrefix: "/", Backend: b.addr, Limits: []Limit{{Amount: 1, Unit: time.Second}}}}}}})
	url := listenerURL(t, p, "l") + "/echo"
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		a := get(t, url)
		if a.code != http.StatusTooManyRequests {
			continue // the first request, or one that met a fresh window
		}
		checkRefusal(t, a, "1", time.Second)
		reset, _ := strconv.ParseFloat(a.header.Get("X-Ratelimit-Reset"), 64)
		time.Sleep(time.Duration((reset + 0.1) * float64(time.Second))) // the window's end is the event
		if again := get(t, url); again.code != http.StatusOK {
			t.Errorf("after the reset: got %d, want 200", again.code)
		}
		return
	}
	t.Fatal("no 429 within 5s from a limit of 1 per second")
}

func TestTokenLimit(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{{Name: "l", Routes: []Route{
		{Name: "llm", PathPrefix: "/llm/", Backend: b.addr, Limits: []Limit{{Tokens: true, Amount: 100, Unit: time.Minute}}}}}}})
	url := listenerURL(t, p, "l") + "/llm/json?tokens=60"
	var got []int
	for range 3 {
		a := get(t, url)
		got = append(got, a.code)
		if a.code == http.StatusTooManyRequests {
			checkRefusal(t, a, "100", time.Minute)
		}
	}
	if want := []int{200, 200, 429}; !slices.Equal(got, want) {
		t.Errorf("statuses of 60-token answers under 100 tokens a minute: got %v, want %v (the one over the budget succeeds)", got, want)
	}
	if h := b.hitsOf("/llm/json"); h != 2 {
		t.Errorf("backend hits: got %d, want 2", h)
	}
}

// TestStreamCountedAtEnd: a stream's usage counts once it has ended, not
// when its usage chunk passes; the stream goes on chunk by chunk, whole, and
// its request body unchanged.
func TestStreamCountedAtEnd(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{{Name: "l", Routes: []Route{
		{Name: "llm", PathPrefix: "/", Backend: b.addr, Limits: []Limit{{Tokens: true, Amount: 100, Unit: time.Minute}}}}}}})
	base := listenerURL(t, p, "l")
	reqBody := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := client.Post(base+"/llm/stream?tokens=150&hold=1", "application/json", strings.NewReader(reqBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for !strings.Contains(readLine(t, r), `"total_tokens":150`) {
	} // the usage chunk passed while the backend still holds the stream
	if a := get(t, base+"/echo"); a.code != http.StatusOK {
		t.Errorf("during the stream, after its usage chunk: got %d, want 200 (counted only at the end)", a.code)
	}
	close(b.release)
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("the stream was cut: %v", err)
	}
	if !strings.Contains(string(rest), "data: [DONE]") {
		t.Errorf("rest of the stream: got %q, want it to end with data: [DONE]", rest)
	}
	if a := get(t, base+"/echo"); a.code != http.StatusTooManyRequests {
		t.Errorf("after the 150-token stream ended: got %d, want 429", a.code)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if string(b.lastBody) != reqBody {
		t.Errorf("request body at the backend: got %s, want it unchanged: %s", b.lastBody, reqBody)
	}
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	l, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the stream: %v (so far %q)", err, l)
	}
	return l
}

// watch opens a trace watcher; once it returns, the watcher is registered.
func watch(t *testing.T, p *Proxy) *http.Response {
	t.Helper()
	resp, err := client.Get("http://" + p.AdminAddr() + "/debug/trace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/debug/trace: got %d, want 200", resp.StatusCode)
	}
	return resp
}

type traceEvent struct {
	EventStart *int64         `json:"eventStart"`
	EventEnd   *int64         `json:"eventEnd"`
	Severity   string         `json:"severity"`
	Message    map[string]any `json:"message"`
}

// readTrace reads a trace stream to its end: every frame must be one
// `data: <json>` line and a blank line.
func readTrace(t *testing.T, body io.Reader) []traceEvent {
	t.Helper()
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("reading the trace: %v", err)
	}
	var events []traceEvent
	for _, frame := range strings.SplitAfter(string(raw), "\n\n") {
		if frame == "" {
			continue
		}
		data, ok := strings.CutPrefix(frame, "data: ")
		if !ok || !strings.HasSuffix(data, "\n\n") || strings.Count(data, "\n") != 2 {
			t.Fatalf("frame %q: want `data: <json>` and a blank line, nothing else", frame)
		}
		var e traceEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("frame %q: %v", frame, err)
		}
		events = append(events, e)
	}
	return events
}

func TestTrace(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{
		{Name: "main", Routes: []Route{
			{Name: "closed", PathPrefix: "/closed", Backend: b.addr, Limits: []Limit{{Amount: 0, Burst: 0, Unit: time.Minute}}},
			{Name: "status", PathPrefix: "/status/", Backend: b.addr},
		}},
		{Name: "down", Routes: []Route{{Name: "gone", PathPrefix: "/", Backend: refusedAddr(t)}}},
	}})
	main, down := listenerURL(t, p, "main"), listenerURL(t, p, "down")
	_, mainPort, _ := net.SplitHostPort(strings.TrimPrefix(main, "http://"))
	const (
		started, snap, route, policy, call, result, resp, finished = "requestStarted", "requestSnapshot", "routeSelection",
			"policySelection", "backendCallStart", "backendCallResult", "responseSnapshot", "requestFinished"
	)
	for _, tc := range []struct {
		name, url  string
		wantCode   int
		wantTypes  []string
		wantRoute  any // selectedRoute: a suffix, or nil
		wantResult map[string]any
	}{
		{"forwarded", main + "/status/418?x=1", 418, []string{started, snap, route, policy, call, result, resp, finished},
			"/listener/main/route/status", map[string]any{"status": 418.0, "error": nil}},
		{"no route", main + "/none", 404, []string{started, snap, route, resp, finished}, nil, nil},
		{"rate limited", main + "/closed", 429, []string{started, snap, route, policy, resp, finished}, "/listener/main/route/closed", nil},
		{"backend refused", down + "/x", 502, []string{started, snap, route, policy, call, result, resp, finished}, "/listener/down/route/gone",
			map[string]any{"status": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := watch(t, p)
			if ct, cc := w.Header.Get("Content-Type"), w.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "" {
				t.Errorf("headers: got Content-Type %q and Cache-Control %q, want text/event-stream and none", ct, cc)
			}
			if got := do(t, http.MethodGet, tc.url, "svc.example.test", ""); got.code != tc.wantCode {
				t.Errorf("traced request: got %d, want %d", got.code, tc.wantCode)
			}
			events := readTrace(t, w.Body) // ends after requestFinished
			var types []string
			for _, e := range events {
				types = append(types, fmt.Sprint(e.Message["type"]))
			}
			if !slices.Equal(types, tc.wantTypes) {
				t.Fatalf("event types: got %v, want %v", types, tc.wantTypes)
			}
			var last int64
			for i, e := range events {
				if e.Severity != "info" {
					t.Errorf("event %d (%s): severity got %q, want info", i, types[i], e.Severity)
				}
				if e.EventEnd == nil || *e.EventEnd < last {
					t.Errorf("event %d (%s): eventEnd got %v, want an integer >= %d", i, types[i], e.EventEnd, last)
				} else {
					last = *e.EventEnd
				}
				if (e.EventStart != nil) != (types[i] == result) || (e.EventStart != nil && *e.EventStart > *e.EventEnd) {
					t.Errorf("event %d (%s): eventStart got %v, want null but on backendCallResult, and <= eventEnd", i, types[i], e.EventStart)
				}
				m := e.Message
				switch types[i] {
				case snap:
					checkRequestState(t, m, tc.url)
				case route:
					sel, evaluated := m["selectedRoute"], m["evaluatedRoutes"].([]any)
					if tc.wantRoute == nil {
						if sel != nil || len(evaluated) == 0 {
							t.Errorf("routeSelection: got %v of %v, want null of every route", sel, evaluated)
						}
					} else if s, _ := sel.(string); !strings.HasSuffix(s, tc.wantRoute.(string)) || !slices.Contains(evaluated, any(s)) {
						t.Errorf("routeSelection: got %v of %v, want a route id ending in %v among the evaluated", sel, evaluated, tc.wantRoute)
					}
					if s, _ := sel.(string); tc.name == "forwarded" && s != "bind/"+mainPort+"/listener/main/route/status" {
						t.Errorf("selectedRoute: got %q, want bind, listener and route", s)
					}
				case policy:
					pol, _ := m["effectivePolicy"].(map[string]any)
					if len(pol) != 17 {
						t.Errorf("effectivePolicy: got %d keys %v, want the 17 of the spec", len(pol), pol)
					}
					if _, limited := pol["localRateLimit"].([]any); limited != (tc.name == "rate limited") {
						t.Errorf("effectivePolicy.localRateLimit: got %v", pol["localRateLimit"])
					}
				case call:
					if want := b.addr; tc.name == "forwarded" && m["target"] != want {
						t.Errorf("backendCallStart target: got %v, want %s", m["target"], want)
					}
				case result:
					if tc.wantResult["status"] == nil {
						if e, _ := m["error"].(string); m["status"] != nil || e == "" {
							t.Errorf("backendCallResult: got status %v error %v, want null and the transport error", m["status"], m["error"])
						}
					} else if m["status"] != tc.wantResult["status"] || m["error"] != nil {
						t.Errorf("backendCallResult: got status %v error %v, want %v", m["status"], m["error"], tc.wantResult)
					}
				case resp:
					st, _ := m["requestState"].(map[string]any)
					r, _ := st["response"].(map[string]any)
					if m["stage"] != "final response" || r["code"] != float64(tc.wantCode) {
						t.Errorf("responseSnapshot: got stage %v code %v, want final response %d", m["stage"], r["code"], tc.wantCode)
					}
				}
			}
		})
	}
}

// checkRequestState checks the initial request snapshot of a GET of url
// with Host svc.example.test.
func checkRequestState(t *testing.T, m map[string]any, url string) {
	t.Helper()
	if m["stage"] != "initial request" {
		t.Errorf("requestSnapshot stage: got %v, want initial request", m["stage"])
	}
	st, _ := m["requestState"].(map[string]any)
	req, _ := st["request"].(map[string]any)
	src, _ := st["source"].(map[string]any)
	pathAndQuery := url[strings.Index(url[len("http://"):], "/")+len("http://"):]
	path, _, _ := strings.Cut(pathAndQuery, "?")
	for k, want := range map[string]any{"method": "GET", "uri": "http://svc.example.test" + pathAndQuery, "path": path,
		"pathAndQuery": pathAndQuery, "host": "svc.example.test", "scheme": "http", "version": "HTTP/1.1"} {
		if req[k] != want {
			t.Errorf("request.%s: got %v, want %v", k, req[k], want)
		}
	}
	if h, _ := req["headers"].(map[string]any); h["user-agent"] == nil {
		t.Errorf("request.headers: got %v, want lower-case names with the user-agent", req["headers"])
	}
	if s, _ := req["startTime"].(string); !strings.HasSuffix(s, "Z") {
		t.Errorf("request.startTime: got %q, want UTC", s)
	} else if _, err := time.Parse(time.RFC3339, s); err != nil {
		t.Errorf("request.startTime: %v", err)
	}
	if src["address"] != "127.0.0.1" || src["rawAddress"] != "127.0.0.1" {
		t.Errorf("source address: got %v", src)
	}
	if port, _ := src["port"].(float64); port <= 0 || port != src["rawPort"] || port != float64(int(port)) {
		t.Errorf("source port: got %v, want the client's port, an integer", src)
	}
}

func TestSecondWatcherEndsFirst(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{{Name: "l", Routes: []Route{{Name: "r", PathPrefix: "/", Backend: b.addr}}}}})
	first := watch(t, p)
	second := watch(t, p)
	if got, err := io.ReadAll(first.Body); err != nil || len(got) != 0 {
		t.Errorf("first watcher: got %q (%v), want its stream ended with no events", got, err)
	}
	get(t, listenerURL(t, p, "l")+"/echo")
	if events := readTrace(t, second.Body); len(events) == 0 || events[len(events)-1].Message["type"] != "requestFinished" {
		t.Errorf("second watcher: got %v, want the request's trace", events)
	}
}

func TestAdmin(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{{Name: "l", Routes: []Route{
		{Name: "r", PathPrefix: "/", Backend: b.addr, Limits: []Limit{{Amount: 3, Burst: 3, Unit: time.Minute}}}}}}})
	admin := "http://" + p.AdminAddr()
	for _, tc := range []struct {
		method, path string
		want         int
		check        func(answer) error
	}{
		{"POST", "/debug/trace", 405, allow("GET")},
		{"GET", "/quitquitquit", 405, allow("POST")},
		{"GET", "/config_dump", 200, func(a answer) error {
			var d struct {
				Binds     []map[string]any
				Listeners []struct {
					Name   string
					Bind   int
					Routes []string
				}
				Routes, Backends, Workloads, Services, Policies []any
			}
			if err := json.Unmarshal([]byte(a.body), &d); err != nil {
				return err
			}
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(listenerURL(t, p, "l"), "http://"))
			if len(d.Binds) != 1 || fmt.Sprint(d.Binds[0]["port"]) != port || d.Binds[0]["listeners"] != nil {
				return fmt.Errorf("binds: got %v, want one of port %s with no listeners in it", d.Binds, port)
			}
			if len(d.Listeners) != 1 || d.Listeners[0].Name != "l" || strconv.Itoa(d.Listeners[0].Bind) != port || !slices.Equal(d.Listeners[0].Routes, []string{"r"}) {
				return fmt.Errorf("listeners: got %+v", d.Listeners)
			}
			if len(d.Routes) != 1 || len(d.Backends) != 1 || d.Workloads == nil || d.Services == nil || len(d.Policies) != 1 {
				return fmt.Errorf("routes, backends, workloads, services, policies: got %s", a.body)
			}
			return nil
		}},
		{"GET", "/memory", 200, func(a answer) error {
			var m map[string]uint64
			if err := json.Unmarshal([]byte(a.body), &m); err != nil || m["sys"] == 0 {
				return fmt.Errorf("got %s (%v), want memory statistics", a.body, err)
			}
			return nil
		}},
		{"GET", "/debug/tasks", 200, contains("goroutine")},
		{"GET", "/debug/pprof/heap", 200, gzipped},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := do(t, tc.method, admin+tc.path, "", "")
			if a.code != tc.want {
				t.Fatalf("status: got %d, want %d (%s)", a.code, tc.want, a.body)
			}
			if err := tc.check(a); err != nil {
				t.Error(err)
			}
		})
	}
}

func allow(method string) func(answer) error {
	return func(a answer) error {
		if got := a.header.Get("Allow"); got != method {
			return fmt.Errorf("Allow: got %q, want %q", got, method)
		}
		return nil
	}
}

func contains(s string) func(answer) error {
	return func(a answer) error {
		if !strings.Contains(a.body, s) {
			return fmt.Errorf("body: got %.200q, want it to contain %q", a.body, s)
		}
		return nil
	}
}

func gzipped(a answer) error {
	if !strings.HasPrefix(a.body, "\x1f\x8b") {
		return fmt.Errorf("body: got %.20q, want a (gzipped) profile", a.body)
	}
	return nil
}

func TestLogging(t *testing.T) {
	p := startProxy(t, Config{})
	logging := "http://" + p.AdminAddr() + "/logging"
	// In turn: each step sees what the ones before it stored.
	for _, tc := range []struct {
		method, level string
		want          int
		wantBody      string
	}{
		{"GET", "", 200, "current log level is info"},
		{"POST", "debug", 200, "current log level is debug"},
		{"POST", "warn,refproxy::trace=TRACE,hyper=off", 200, "current log level is warn,refproxy::trace=TRACE,hyper=off"},
		{"GET", "", 200, "current log level is warn,refproxy::trace=TRACE,hyper=off"},
		{"POST", "verbose", 422, ""},
		{"POST", "mod=debug=trace", 422, ""},
		{"POST", "=debug", 422, ""},
		{"POST", "info,mod=loud", 422, ""},
		{"POST", "", 422, ""},
		{"GET", "", 200, "current log level is warn,refproxy::trace=TRACE,hyper=off"},
		{"PUT", "", 405, ""},
	} {
		a := do(t, tc.method, logging+"?level="+tc.level, "", "")
		if a.code != tc.want || (tc.wantBody != "" && a.body != tc.wantBody) {
			t.Errorf("%s level=%q: got %d %q, want %d %q", tc.method, tc.level, a.code, a.body, tc.want, tc.wantBody)
		}
		if tc.want == 422 && a.body == "" {
			t.Errorf("%s level=%q: got 422 with no reason", tc.method, tc.level)
		}
	}
}

func TestProfile(t *testing.T) {
	p := startProxy(t, Config{})
	profile := "http://" + p.AdminAddr() + "/debug/pprof/profile"
	for _, s := range []string{"0", "301", "-1", "1.5", "ten", "%20"} { // (not the default, 10s: too long)
		if a := get(t, profile+"?seconds="+s); a.code != http.StatusUnprocessableEntity {
			t.Errorf("seconds=%s: got %d, want 422", s, a.code)
		}
	}
	// Profiling already in use in this process: 503.
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Fatal(err)
	}
	a := get(t, profile+"?seconds=1")
	pprof.StopCPUProfile()
	if a.code != http.StatusServiceUnavailable {
		t.Errorf("while profiling is in use: got %d, want 503", a.code)
	}
	if a := get(t, profile+"?seconds=1"); a.code != http.StatusOK || gzipped(a) != nil {
		t.Errorf("seconds=1: got %d %.20q, want 200 and a profile", a.code, a.body)
	}
}

func TestQuitQuitQuit(t *testing.T) {
	b := startBackend(t)
	p := startProxy(t, Config{Listeners: []Listener{{Name: "l", Routes: []Route{{Name: "r", PathPrefix: "/", Backend: b.addr}}}}})
	url := listenerURL(t, p, "l")
	a := do(t, http.MethodPost, "http://"+p.AdminAddr()+"/quitquitquit", "", "")
	if a.code != http.StatusOK || a.body != "shutting down" {
		t.Errorf("quitquitquit: got %d %q, want 200 shutting down", a.code, a.body)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done() not closed 10s after quitquitquit")
	}
	if _, err := client.Get(url + "/echo"); err == nil {
		t.Errorf("the listener still answers after quitquitquit")
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after quitquitquit: %v", err)
	}
}

func TestStartRejects(t *testing.T) {
	for name, cfg := range map[string]Config{
		"a limit without a unit":  {Listeners: []Listener{{Name: "l", Routes: []Route{{Name: "r", Backend: "x:1", Limits: []Limit{{Amount: 1}}}}}}},
		"two listeners, one name": {Listeners: []Listener{{Name: "l"}, {Name: "l"}}},
	} {
		if p, err := Start(cfg); err == nil {
			p.Close()
			t.Errorf("%s: Start got no error, want one", name)
		}
	}
}
