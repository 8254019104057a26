package stepdefs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// The state's means of acting on the proxy that more than one topic uses:
// sending a request (send, exchange, chat) with the credentials the
// scenario planted, and adding a route or checking a condition through the
// scenario's Setup and deployment.

func (s *state) condition(ctx context.Context, kind, name, typ, status, reason string) error {
	d, err := s.deployment(ctx)
	if err != nil {
		return err
	}
	cr, ok := d.(targets.ConditionReader)
	if !ok {
		return fmt.Errorf("the %s target has no resource conditions; condition scenarios need a cluster target", s.cfg.Target.Name())
	}
	conds, err := cr.Conditions(ctx, kind, name)
	if err != nil {
		return err
	}
	what := kind
	if name != "" {
		what += " " + name
	}
	for _, c := range conds {
		if c.Type != typ {
			continue
		}
		if c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s condition %s: got status %q reason %q (%s), want status %q reason %q", what, typ, c.Status, c.Reason, c.Message, status, reason)
		}
		return nil
	}
	return fmt.Errorf("%s has no %s condition; got %+v", what, typ, conds)
}

// addCredentials adds to a request's headers h the credentials the
// scenario asked for, and in a run that plants them, one in each default
// credential header the step did not set; the run keeps whatever
// credentials h carries, to scrub them from all it writes.
func (s *state) addCredentials(h http.Header) {
	last := map[string]string{}
	for _, name := range s.creds.headers {
		secret := s.plant(strings.ToLower(name))
		h.Set(name, credentialValue(name, secret))
		s.creds.sent = append(s.creds.sent, secret)
		last[strings.ToLower(name)] = secret
	}
	if s.creds.cookie {
		// The backend makes the cookie (noteResponse): a value the
		// request carried would be in its own snapshot, under the name of
		// this header.
		h.Add(mock.HeaderSetCookie, "gwdiag-backend-session")
	}
	if s.cfg.PlantCredentials {
		for _, d := range redact.Defaults {
			// Not where the step set one, nor in a header the scenario's
			// routes or limits read (a limit keyed by x-api-key counts the
			// requests without one together).
			if d.Name == "set-cookie" || h.Get(d.Name) != "" || s.setup.ReadsHeader(d.Name) {
				continue
			}
			h.Set(d.Name, credentialValue(d.Name, s.plant(d.Name)))
		}
	}
	if len(last) > 0 {
		s.creds.lastSent = last
	}
	s.cfg.Secrets.AddHeaders(h)
}

// noteResponse keeps the credentials a response's headers carry (the
// cookie a backend set), for the run to scrub and the scenario to look for.
func (s *state) noteResponse(h http.Header) {
	s.cfg.Secrets.AddHeaders(h)
	if !s.creds.cookie {
		return
	}
	for _, c := range h.Values("Set-Cookie") {
		name, rest, ok := strings.Cut(c, "=")
		if !ok || name != "gwdiag-backend-session" {
			continue
		}
		v, _, _ := strings.Cut(rest, ";")
		s.creds.sent = append(s.creds.sent, v)
		if s.creds.lastSent == nil {
			s.creds.lastSent = map[string]string{}
		}
		s.creds.lastSent["set-cookie"] = v
	}
}

// send makes one request to a listener. target is a path, or an absolute
// URL whose host becomes the Host header only (the request always goes to
// the listener, as the trace client's inject mode does). A response that
// does not arrive whole is an error.
func (s *state) send(ctx context.Context, listener, method, reqTarget string, header http.Header, body []byte) (*response, error) {
	r, err := s.exchange(ctx, listener, method, reqTarget, header, body)
	if err == nil && r.broken != nil {
		return nil, r.broken
	}
	return r, err
}

// exchange is send that records a response which did not arrive whole
// (no head: status 0; a body cut short) in response.broken instead of
// failing: what a proxy in front of a broken backend may rightly do.
func (s *state) exchange(ctx context.Context, listener, method, reqTarget string, header http.Header, body []byte) (*response, error) {
	d, err := s.replica(ctx)
	if err != nil {
		return nil, err
	}
	addr, err := d.ListenerAddr(listener)
	if err != nil {
		return nil, err
	}
	host := ""
	path := reqTarget
	if strings.HasPrefix(reqTarget, "http://") || strings.HasPrefix(reqTarget, "https://") {
		u, err := url.Parse(reqTarget)
		if err != nil {
			return nil, fmt.Errorf("bad URL %q: %w", reqTarget, err)
		}
		host = u.Host
		path = u.RequestURI()
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	if body == nil {
		req.Body = http.NoBody
	}
	for k, v := range header {
		req.Header[k] = v
	}
	s.addCredentials(req.Header)
	if host != "" {
		req.Host = host
	}
	// A failure once the request's own bound has passed is the bound's
	// doing: a proxy that never finishes its answer, not one that cut it.
	late := func(what string, err error) error {
		return fmt.Errorf("%s %s via %s: %s within %s: %w", method, reqTarget, addr, what, s.cfg.RequestTimeout, err)
	}
	sent := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		if await.Expired(ctx) {
			return nil, late("no response", err)
		}
		r := &response{broken: fmt.Errorf("%s %s via %s: no response: %w", method, reqTarget, addr, err)}
		s.responses = append(s.responses, r)
		return r, nil
	}
	defer resp.Body.Close()
	s.noteResponse(resp.Header)
	r := &response{status: resp.StatusCode, header: resp.Header, sent: sent, at: time.Now()}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if err := sse.EachData(resp.Body, s.cfg.Limits, func(d string) { r.chunks = append(r.chunks, strings.TrimSpace(d)) }); err != nil {
			if await.Expired(ctx) {
				return nil, late(fmt.Sprintf("stream not ended after %d chunks", len(r.chunks)), err)
			}
			r.broken = fmt.Errorf("%s %s: stream cut after %d chunks: %w", method, reqTarget, len(r.chunks), err)
		}
	} else if r.body, err = sse.ReadBody(resp.Body, s.cfg.Limits.BodyBytes, "response body"); err != nil {
		if await.Expired(ctx) {
			return nil, late(fmt.Sprintf("body not ended after %d bytes", len(r.body)), err)
		}
		r.broken = fmt.Errorf("%s %s: body cut after %d bytes: %w", method, reqTarget, len(r.body), err)
	}
	s.responses = append(s.responses, r)
	return r, nil
}

// chatMode is how a chat completion asks for its answer.
type chatMode int

// chat sends an OpenAI chat completion whose response reports n tokens of usage.
func (s *state) chat(ctx context.Context, n int, mode chatMode) (*response, error) {
	return s.chatWith(ctx, n, mode, http.Header{})
}

// chatWith is chat with the client's headers h.
func (s *state) chatWith(ctx context.Context, n int, mode chatMode, h http.Header) (*response, error) {
	h.Set("Content-Type", "application/json")
	h.Set(mock.HeaderPromptTokens, strconv.Itoa(n/2))
	h.Set(mock.HeaderCompletionTokens, strconv.Itoa(n-n/2))
	r, err := s.send(ctx, targets.DefaultListener, http.MethodPost, "/v1/chat/completions", h, chatBody(mode))
	if err == nil && mode != noStream {
		s.streamTokens = n
	}
	return r, err
}

func addRoute(ctx context.Context, listener, name, prefix, backend string) error {
	s := getState(ctx)
	if s.dep != nil {
		return fmt.Errorf("route %q declared after the proxy was configured; declare routes first", name)
	}
	if s.setup.BackendNamed(backend) == nil {
		return fmt.Errorf("route %q: backend %q is not declared", name, backend)
	}
	if s.setup.RouteNamed(name) != nil {
		return fmt.Errorf("route %q declared twice", name)
	}
	l := s.setup.ListenerNamed(listener)
	l.Routes = append(l.Routes, targets.Route{Name: name, PathPrefix: prefix, Backend: backend})
	return nil
}

// plant is a new credential of the run (or of the scenario, in a step
// test without a run).
func (s *state) plant(what string) string {
	if s.cfg.Secrets == nil {
		s.cfg.Secrets = NewSecrets()
	}
	return s.cfg.Secrets.Plant(what)
}

// credentialValue is a credential as a client sends it in header name.
func credentialValue(name, secret string) string {
	switch strings.ToLower(name) {
	case "authorization":
		return "Bearer " + secret
	case "proxy-authorization":
		return "Basic " + secret
	case "cookie":
		return "gwdiag-session=" + secret + "; theme=plain"
	}
	return secret
}

const (
	noStream chatMode = iota
	// streamWithUsage asks for a stream and its usage
	// (stream_options.include_usage), as a client that wants its usage does.
	streamWithUsage
	// streamWithoutUsage asks for a stream only: a proxy that counts tokens
	// must ask the backend for usage itself (an extended feature).
	streamWithoutUsage
)

// chatBody is an OpenAI chat completion request of the mode.
func chatBody(mode chatMode) []byte {
	body := map[string]any{"model": "conformance", "messages": []any{map[string]any{"role": "user", "content": "hello"}}}
	if mode != noStream {
		body["stream"] = true
	}
	if mode == streamWithUsage {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	b, _ := json.Marshal(body)
	return b
}
