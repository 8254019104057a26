package stepdefs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// Steps of the features that hold traces to keep credentials out
// (trace-redacts-credentials, trace-redacts-api-keys-and-cookies). Every
// credential a scenario sends is made for it (Secrets.Plant), never written
// in a feature: a step's text goes into every report.
func registerRedactSteps(sc *godog.ScenarioContext) {
	step(sc, `^the config names "([^"]*)" as a sensitive header$`, (*state).sensitiveHeader)
	step(sc, `^the requests carry credentials in ((?:"[^"]+")(?:(?:, | and )"[^"]+")*)$`, (*state).carryCredentials)
	step(sc, `^the backend answers with a cookie$`, (*state).backendSetsCookie)
	step(sc, `^an LLM backend "([^"]*)" called with an API key of its own$`, (*state).llmWithAPIKey)
	step(sc, `^no trace event holds a credential the requests carried$`, (*state).noEventHoldsACredential)
	step(sc, `^the "([^"]*)" (request|response) snapshot shows the header "([^"]*)" without its credential$`, (*state).snapshotHidesCredential)
	step(sc, `^the response echoes the credentials as sent$`, (*state).echoesCredentials)
	step(sc, `^the client received the cookie as the backend set it$`, (*state).clientGotCookie)
	step(sc, `^the LLM backend received its API key$`, (*state).llmGotKey)
	step(sc, `^the config dump holds no credential the scenario planted$`, (*state).configDumpHoldsNoCredential)
}

var quoted = regexp.MustCompile(`"([^"]+)"`)

func (s *state) sensitiveHeader(_ context.Context, name string) error {
	s.setup.SensitiveHeaders = append(s.setup.SensitiveHeaders, name)
	return nil
}

func (s *state) carryCredentials(_ context.Context, list string) error {
	for _, m := range quoted.FindAllStringSubmatch(list, -1) {
		s.creds.headers = append(s.creds.headers, m[1])
	}
	return nil
}

func (s *state) backendSetsCookie(context.Context) error {
	s.creds.cookie = true
	return nil
}

func (s *state) llmWithAPIKey(_ context.Context, name string) error {
	if s.setup.BackendNamed(name) != nil {
		return fmt.Errorf("backend %q declared twice", name)
	}
	s.creds.apiKey = s.plant("provider-key")
	s.creds.sent = append(s.creds.sent, s.creds.apiKey)
	s.setup.Backends = append(s.setup.Backends, targets.Backend{Name: name, Kind: targets.BackendLLM, APIKey: s.creds.apiKey})
	return nil
}

// noEventHoldsACredential: no string of any event of the scenario's trace
// (a key or a value, at any depth) and no comment of its stream holds a
// credential the scenario sent, the provider key it configured included.
func (s *state) noEventHoldsACredential(context.Context) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	for i, e := range t.Events {
		if path, err := s.credentialIn(e.Message, "message"); err != nil || path != "" {
			return cmp.Or(err, fmt.Errorf("event %d (%s) shows a credential of the exchange (sent by the client or set by the backend) at %s", i+1, eventName(e), path))
		}
	}
	for _, c := range t.Comments {
		if path, _ := s.credentialIn(c, "comment"); path != "" {
			return errors.New("a comment of the trace stream shows a credential the request carried")
		}
	}
	return nil
}

// configDumpHoldsNoCredential: no string of the config dump the last
// admin call read (a key or a value, at any depth, escapes decoded) holds
// a credential the scenario planted, the provider key it configured
// included; nor do its bytes as sent.
func (s *state) configDumpHoldsNoCredential(context.Context) error {
	r, err := s.adminResponse()
	if err != nil {
		return err
	}
	var dump any
	if err := json.Unmarshal(r.body, &dump); err != nil {
		return fmt.Errorf("the config dump is not JSON: %v", err)
	}
	if path, err := s.credentialIn(dump, "config_dump"); err != nil || path != "" {
		return cmp.Or(err, fmt.Errorf("the config dump shows a credential the scenario planted at %s", path))
	}
	if path, _ := s.credentialIn(string(r.body), "bytes"); path != "" {
		return errors.New("the config dump's bytes hold a credential the scenario planted")
	}
	return nil
}

// credentialIn is the path (from root) of the first string of v that
// holds a credential the scenario sent or planted, "" when none does; an
// error when the scenario has none to look for.
func (s *state) credentialIn(v any, root string) (string, error) {
	if len(s.creds.sent) == 0 {
		return "", errors.New("the scenario sent no credential: nothing to look for")
	}
	found := ""
	eachString(v, root, func(path, str string) {
		for _, c := range s.creds.sent {
			if found == "" && strings.Contains(str, c) {
				found = path
			}
		}
	})
	return found, nil
}

// eventName names an event for a message: its type and stage.
func eventName(e trace.Event) string {
	if st := e.Stage(); st != "" {
		return string(e.Type()) + " " + st
	}
	return string(e.Type())
}

// eachString calls f with every string of v (map keys too) and its path.
func eachString(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case string:
		f(path, v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f(path+" (a key)", k)
			eachString(v[k], path+"."+k, f)
		}
	case []any:
		for i, x := range v {
			eachString(x, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}

// snapshotHidesCredential: the snapshot at stage shows the header (any
// case), so a reader can tell it was there, and its value holds no
// credential the last request carried in it.
func (s *state) snapshotHidesCredential(_ context.Context, stage, kind, name string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	typ, part := trace.RequestSnapshot, "request"
	if kind == "response" {
		typ, part = trace.ResponseSnapshot, "response"
	}
	for _, e := range t.Events {
		if e.Type() != typ || e.Stage() != stage {
			continue
		}
		st, _ := e.Message["requestState"].(map[string]any)
		r, _ := st[part].(map[string]any)
		headers, _ := r["headers"].(map[string]any)
		for k, v := range headers {
			if !strings.EqualFold(k, name) {
				continue
			}
			secret := s.creds.lastSent[strings.ToLower(name)]
			var leak bool
			eachString(v, "", func(_, x string) { leak = leak || secret != "" && strings.Contains(x, secret) })
			if leak {
				return fmt.Errorf("the %q %s snapshot shows %s with the credential the request carried", stage, kind, name)
			}
			return nil
		}
		return fmt.Errorf("the %q %s snapshot has no header %q (a redacted header stays, without its value)", stage, kind, name)
	}
	return fmt.Errorf("the trace has no %q %s snapshot", stage, kind)
}

// echoesCredentials: the echo backend (its /headers or /anything answer)
// received each end-to-end credential header as the client sent it: a
// trace is redacted, the traffic is not.
func (s *state) echoesCredentials(context.Context) error {
	echoed, err := s.echoedHeaders()
	if err != nil {
		return err
	}
	for _, name := range s.creds.headers {
		if strings.EqualFold(name, "proxy-authorization") {
			// For the proxy itself, never forwarded (a hop-by-hop header,
			// as net/http/httputil's ReverseProxy drops it).
			continue
		}
		secret := s.creds.lastSent[strings.ToLower(name)]
		got := echoed[http.CanonicalHeaderKey(name)]
		if want := credentialValue(name, secret); !strings.Contains(got, want) {
			return fmt.Errorf("the backend did not receive header %s as sent (got %d bytes without the credential): a proxy redacts its traces, never the traffic", name, len(got))
		}
	}
	return nil
}

// clientGotCookie: the client's response carries the Set-Cookie the
// backend gave, credential and all.
func (s *state) clientGotCookie(context.Context) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	secret := s.creds.lastSent["set-cookie"]
	for _, c := range r.header.Values("Set-Cookie") {
		if secret != "" && strings.Contains(c, secret) {
			return nil
		}
	}
	return fmt.Errorf("the client did not receive the backend's cookie (%d Set-Cookie headers): a proxy redacts its traces, never the traffic", len(r.header.Values("Set-Cookie")))
}

// llmGotKey: the LLM backend received "Authorization: Bearer <key>" (the
// mock tells it by its hash).
func (s *state) llmGotKey(context.Context) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	got := r.header.Get(mock.HeaderAuthorizationSHA256)
	if got != mock.AuthorizationSHA256("Bearer "+s.creds.apiKey) {
		if got == "" {
			return errors.New("the LLM backend received no Authorization: the proxy did not send the configured API key")
		}
		return errors.New("the LLM backend received an Authorization other than \"Bearer <the configured API key>\"")
	}
	return nil
}
