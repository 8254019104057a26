package stepdefs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/targets"
)

func registerAdminSteps(sc *godog.ScenarioContext) {
	step(sc, `^I (GET|POST) the admin path "([^"]*)"$`, (*state).requestAdminPath)
	step(sc, `^I call the admin path "([^"]*)"$`, (*state).callAdminPath)
	step(sc, `^the admin response is successful$`, (*state).adminResponseIsSuccessful)
	step(sc, `^the admin response is JSON naming the categories ([\w, ]+)$`, (*state).adminResponseNamesCategories)
	step(sc, `^the admin response status is (\d+)$`, (*state).adminResponseStatusIs)
	step(sc, `^the admin response body matches "(.*)"$`, (*state).adminResponseBodyMatches)
	step(sc, `^the admin response body is not empty$`, (*state).adminResponseBodyIsNotEmpty)
	step(sc, `^the admin response is JSON with the keys ([\w, ]+)$`, (*state).adminResponseHasKeys)
	step(sc, `^the config dump lists listeners under binds$`, (*state).configDumpListsListenersUnderBinds)
	step(sc, `^the config dump lists each backend as the reference does, by variant with a name and a target$`, (*state).configDumpListsBackendsAsReference)
	step(sc, `^the config dump mentions the route "([^"]*)"$`, (*state).configDumpMentionsRoute)
	step(sc, `^within (\d+) seconds the proxy stops accepting requests$`, (*state).withinSecondsProxyStopsAcceptingRequests)
}

func (s *state) requestAdminPath(ctx context.Context, method, path string) error {
	return s.adminCall(ctx, method, path)
}

// The spec shows the method of /logging only: ask with GET, and when
// the proxy answers 405, with a method its Allow header names.
func (s *state) callAdminPath(ctx context.Context, path string) error {
	if err := s.adminCall(ctx, http.MethodGet, path); err != nil || s.admin.status != http.StatusMethodNotAllowed {
		return err
	}
	allow := s.admin.header.Get("Allow")
	for _, m := range strings.Split(allow, ",") {
		if m = strings.TrimSpace(m); m != "" && m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions {
			return s.adminCall(ctx, m, path)
		}
	}
	if allow == "" {
		return s.adminCall(ctx, http.MethodPost, path)
	}
	return nil
}

func (s *state) adminResponseIsSuccessful(ctx context.Context) error {
	r, err := s.adminResponse()
	if err != nil {
		return err
	}
	if r.status/100 != 2 {
		return fmt.Errorf("admin response status: got %d (body %q), want 2xx", r.status, trim(r.body))
	}
	return nil
}

func (s *state) adminResponseNamesCategories(ctx context.Context, list string) error {
	dump, missing, err := s.adminKeys(list, hasKey)
	if err == nil && len(missing) > 0 {
		err = fmt.Errorf("config_dump names no category %s at any depth; got top-level keys %v", strings.Join(missing, ", "), keys(dump))
	}
	return err
}

func (s *state) adminResponseStatusIs(ctx context.Context, want int) error {
	r, err := s.adminResponse()
	if err != nil {
		return err
	}
	if r.status != want {
		return fmt.Errorf("admin response status: got %d (body %q), want %d", r.status, trim(r.body), want)
	}
	return nil
}

func (s *state) adminResponseBodyMatches(ctx context.Context, pattern string) error {
	r, err := s.adminResponse()
	if err != nil {
		return err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return err
	}
	if body := strings.TrimRight(string(r.body), "\n"); !re.MatchString(body) {
		return fmt.Errorf("admin response body: got %q, want it to match %q", trim(r.body), pattern)
	}
	return nil
}

func (s *state) adminResponseBodyIsNotEmpty(ctx context.Context) error {
	r, err := s.adminResponse()
	if err != nil {
		return err
	}
	if len(r.body) == 0 {
		return fmt.Errorf("admin response body: got nothing, want content")
	}
	return nil
}

func (s *state) adminResponseHasKeys(ctx context.Context, list string) error {
	dump, missing, err := s.adminKeys(list, func(v any, k string) bool {
		_, ok := v.(map[string]any)[k]
		return ok
	})
	if err == nil && len(missing) > 0 {
		err = fmt.Errorf("config_dump lacks %s; got keys %v", strings.Join(missing, ", "), keys(dump))
	}
	return err
}

func (s *state) configDumpListsListenersUnderBinds(ctx context.Context) error {
	dump, err := s.adminJSON()
	if err != nil {
		return err
	}
	binds, _ := dump["binds"].([]any)
	for _, b := range binds {
		if m, ok := b.(map[string]any); ok && m["listeners"] != nil {
			return nil
		}
	}
	return fmt.Errorf("config_dump binds: got %s, want binds with listeners", trim(mustJSON(dump["binds"])))
}

func (s *state) configDumpListsBackendsAsReference(ctx context.Context) error {
	r, err := s.adminResponse()
	if err != nil {
		return err
	}
	return referenceBackends(r.body)
}

func (s *state) configDumpMentionsRoute(ctx context.Context, route string) error {
	r, err := s.adminResponse()
	if err != nil {
		return err
	}
	if !strings.Contains(string(r.body), `"`+route+`"`) && !strings.Contains(string(r.body), "/"+route+`"`) {
		return fmt.Errorf("config_dump does not mention route %q", route)
	}
	return nil
}

func (s *state) withinSecondsProxyStopsAcceptingRequests(ctx context.Context, secs int) error {
	addr, err := s.dep.ListenerAddr(targets.DefaultListener)
	if err != nil {
		return err
	}
	// Each dial has its own short bound: a listener that still accepts
	// answers at once, and a dial the wait's deadline cuts says nothing.
	err = await.Until(ctx, time.Duration(secs)*time.Second, 20*time.Millisecond, await.Closed(addr, quitDialTimeout))
	if err != nil {
		return fmt.Errorf("listener %s did not stop accepting connections within %ds of /quitquitquit: %w", addr, secs, err)
	}
	return nil
}

// quitDialTimeout bounds one dial of the quit step: well under a second,
// so the step fails promptly at its bound.
const quitDialTimeout = 200 * time.Millisecond

func (s *state) adminCall(ctx context.Context, method, path string) error {
	d, err := s.deployment(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout+2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+d.AdminAddr()+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := sse.ReadBody(resp.Body, s.cfg.Limits.BodyBytes, "admin "+path+" body")
	if err != nil {
		return fmt.Errorf("admin %s %s: body: %w", method, path, err)
	}
	s.admin = &response{status: resp.StatusCode, header: resp.Header, body: body}
	return nil
}

func (s *state) adminResponse() (*response, error) {
	if s.admin == nil {
		return nil, fmt.Errorf("no admin request was made")
	}
	return s.admin, nil
}

func (s *state) adminJSON() (map[string]any, error) {
	r, err := s.adminResponse()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		return nil, fmt.Errorf("admin response is not a JSON object: %v: %q", err, trim(r.body))
	}
	return m, nil
}

// referenceBackends checks the backends of a config dump against the shape
// the reference implementation writes (the schema leaves them open):
// {"backend": {<variant>: {"name": ..., "target": ...}}}, one variant each.
func referenceBackends(body []byte) error {
	d, err := configdump.Parse(body)
	if err != nil {
		return fmt.Errorf("config_dump: %v", err)
	}
	if len(d.Backends) == 0 {
		return fmt.Errorf("config_dump backends: got none, want the configured backend")
	}
	for i, b := range d.Backends {
		if len(b.Backend) != 1 {
			return fmt.Errorf("config_dump backends[%d]: got %d variants under \"backend\", want one (host, ai, ...)", i, len(b.Backend))
		}
		for variant, spec := range b.Backend {
			if spec.Name == "" || spec.Target == nil {
				return fmt.Errorf("config_dump backends[%d].backend.%s: got name %q, target %v; want both", i, variant, spec.Name, spec.Target)
			}
		}
	}
	return nil
}

// adminKeys reads the admin response as a JSON object and returns the keys
// of the comma-separated list that has does not find in it.
func (s *state) adminKeys(list string, has func(v any, key string) bool) (map[string]any, []string, error) {
	dump, err := s.adminJSON()
	if err != nil {
		return nil, nil, err
	}
	var missing []string
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); !has(dump, k) {
			missing = append(missing, k)
		}
	}
	return dump, missing, nil
}

// hasKey reports whether key names a member of any object in v, at any depth.
func hasKey(v any, key string) bool {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x[key]; ok {
			return true
		}
		for _, e := range x {
			if hasKey(e, key) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasKey(e, key) {
				return true
			}
		}
	}
	return false
}
