package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/refproxy/config"

	"github.com/gwdiag/gwdiag/steps/freeport"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// testSetup has two listeners, an LLM route with request and token
// limits, and a gateway-wide limit.
var testSetup = targets.Setup{
	Backends: []targets.Backend{{Name: "httpbin", Kind: targets.BackendEcho}, {Name: "openai", Kind: targets.BackendLLM}},
	Listeners: []targets.Listener{
		{Name: targets.DefaultListener, Routes: []targets.Route{
			{Name: "llm", PathPrefix: "/v1", Backend: "openai", Limits: []targets.Limit{
				{Kind: targets.LimitRequests, Amount: 3, Burst: 3, Unit: time.Second},
				{Kind: targets.LimitTokens, Amount: 100, Unit: time.Minute},
			}},
			{Name: "httpbin", PathPrefix: "/", Backend: "httpbin"},
		}},
		{Name: "narrow", Routes: []targets.Route{{Name: "api", PathPrefix: "/api", Backend: "httpbin",
			Global: []targets.GlobalLimit{{Kind: targets.LimitRequests, Amount: 5, Unit: "day", KeyHeader: "x-user"}}}}},
	},
	RateLimitService: "127.0.0.1:8081", RateLimitKey: "k1", RateLimitTimeout: 1500 * time.Millisecond,
	Policies: []targets.Policy{
		{Name: "gateway-narrow", TargetKind: "Gateway", TargetName: "narrow", Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 10, Unit: time.Minute}}},
		{Name: "orphan", TargetKind: "HTTPRoute", TargetName: "missing", Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 1, Unit: time.Hour}}},
	},
}

// render writes testSetup in a style and checks it against the published
// schema and refproxy's loader.
func render(t *testing.T, style ConfigStyle) ([]byte, *config.Config) {
	t.Helper()
	// The reference implementation's published schema, as it is
	// (config.SchemaJSON, without the loader's additions).
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(config.SchemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	yml, err := StandaloneConfig(testSetup, style, "127.0.0.1:15000", map[string]int{targets.DefaultListener: 3000, "narrow": 3001},
		map[string]string{"httpbin": "127.0.0.1:8000", "openai": "127.0.0.1:8001"})
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(yml)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(js)))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("the reference schema rejects the config the suite writes:\n%v\n%s", err, yml)
	}
	cfg, err := config.Parse("conformance.yaml", yml)
	if err != nil {
		t.Fatalf("refproxy rejects the config the suite writes: %v\n%s", err, yml)
	}
	return yml, cfg
}

// TestStandaloneConfigMatchesReferenceSchema checks that the config the
// process target writes for a third-party proxy is one the real
// implementation accepts, and one the reference proxy accepts too.
func TestStandaloneConfigMatchesReferenceSchema(t *testing.T) {
	yml, cfg := render(t, StyleBinds)
	rl := cfg.Binds[0].Listeners[0].Routes[0].Policies.LocalRateLimit
	if len(rl) != 2 || rl[0].MaxTokens != 6 || rl[0].TokensPerFill != 3 || rl[1].MaxTokens != 100 || rl[1].Type != "tokens" {
		t.Errorf("rate limits: got %+v, want requests 6/3 per 1s (burst 3) and tokens 100/100 per 1m", rl)
	}
	// The gateway limit targets the narrow listener's bind; the orphan route
	// policy exists only in clusters.
	if len(cfg.Policies) != 1 {
		t.Fatalf("top-level policies: got %d, want 1 (the gateway limit)\n%s", len(cfg.Policies), yml)
	}
	// The global limit, with the suite's bound on each call to its service.
	rrl := cfg.Binds[1].Listeners[0].Routes[0].Policies.RemoteRateLimit
	if rrl == nil {
		t.Fatalf("route api: no remoteRateLimit\n%s", yml)
	}
	if p := rrl.Remote(); p.Addr != "127.0.0.1:8081" || p.Timeout != 1500*time.Millisecond || p.FailureMode != "failClosed" || len(p.Descriptors) != 1 {
		t.Errorf("remoteRateLimit: got %+v, want 127.0.0.1:8081, failClosed, one descriptor, each call bounded by 1.5s", p)
	}
	if g := cfg.Policies[0].Target.Gateway; g == nil || g.GatewayName != "bind/3001" || g.ListenerName == nil || *g.ListenerName != "narrow" {
		t.Errorf("gateway policy target: got %+v, want bind/3001 listener narrow", cfg.Policies[0].Target)
	}
}

// TestGatewaysStyleIsTheSameConfig: written as gateways and routes, the
// setup is the same runtime config: the same ports, routes, backends and
// limits, the gateway limit on the same bind.
func TestGatewaysStyleIsTheSameConfig(t *testing.T) {
	yml, gw := render(t, StyleGateways)
	if !strings.Contains(string(yml), "gateways:") || strings.Contains(string(yml), "binds:") {
		t.Fatalf("not the gateways style:\n%s", yml)
	}
	_, bd := render(t, StyleBinds)
	if len(gw.Binds) != len(bd.Binds) {
		t.Fatalf("%d binds, want %d", len(gw.Binds), len(bd.Binds))
	}
	for i := range bd.Binds {
		a, b := bd.Binds[i], gw.Binds[i]
		if a.Port != b.Port || len(b.Listeners) != 1 {
			t.Fatalf("bind %d: port %d with %d listeners, want port %d with 1", i, b.Port, len(b.Listeners), a.Port)
		}
		got, _ := json.Marshal(b.Listeners[0].Routes)
		want, _ := json.Marshal(a.Listeners[0].Routes)
		if string(got) != string(want) {
			t.Errorf("bind %d routes:\n got: %s\nwant: %s", i, got, want)
		}
	}
	if len(gw.Policies) != 1 || gw.Policies[0].Target.Gateway == nil || gw.Policies[0].Target.Gateway.GatewayName != "bind/3001" {
		t.Errorf("gateway policy: %+v, want one on bind/3001", gw.Policies)
	}
}

// TestChoosePortsAreDistinct: the admin server and every listener get
// ports of their own. Picked one at a time, a port closed at once could
// come back as the next, and refproxy refused the config ("port 33855 is
// bound twice": a failure of TestProcessConformance under load).
func TestChoosePortsAreDistinct(t *testing.T) {
	setup := targets.Setup{}
	for i := range 40 {
		setup.Listeners = append(setup.Listeners, targets.Listener{Name: fmt.Sprintf("l%d", i)})
	}
	for range 20 {
		admin, ports, err := ChoosePorts(setup)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{admin: "admin"}
		for name, p := range ports {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
			if other, ok := seen[addr]; ok {
				t.Fatalf("%s and %s both got %s", name, other, addr)
			}
			seen[addr] = name
		}
		if len(ports) != len(setup.Listeners) {
			t.Fatalf("%d ports for %d listeners", len(ports), len(setup.Listeners))
		}
	}
}

// TestNoFreePortsIsTheEnvironment: a machine without free ports is the
// suite's environment (the scenario not run, with the fix), never the
// proxy's failure; other errors are kept as they are.
func TestNoFreePortsIsTheEnvironment(t *testing.T) {
	err := portsMissing(fmt.Errorf("picking: %w", freeport.ErrNoFreePorts))
	var env *targets.EnvironmentError
	if !errors.As(err, &env) || !strings.Contains(env.Fix, "free ports from") || !errors.Is(err, freeport.ErrNoFreePorts) {
		t.Errorf("%v: want an EnvironmentError naming the ports to free", err)
	}
	other := errors.New("other")
	if portsMissing(other) != other {
		t.Error("another error was made the environment's")
	}
}

// TestRetryTakenPorts: a start whose port another program took is tried
// again, three times at most; any other error ends it at once.
func TestRetryTakenPorts(t *testing.T) {
	taken := errors.New("listen tcp 127.0.0.1:10001: bind: address already in use")
	other := errors.New("invalid config")
	for name, tc := range map[string]struct {
		errs      []error
		wantTries int
		wantErr   error
	}{
		"taken every time":  {[]error{taken, taken, taken}, 3, taken},
		"taken, then free":  {[]error{taken, nil}, 2, nil},
		"another error":     {[]error{other}, 1, other},
		"started the first": {[]error{nil}, 1, nil},
	} {
		tries := 0
		v, err := RetryTakenPorts(func() (int, error) {
			tries++
			return tries, tc.errs[tries-1]
		})
		if tries != tc.wantTries || err != tc.wantErr || v != tries {
			t.Errorf("%s: %d tries, %v, value %d; want %d tries, %v", name, tries, err, v, tc.wantTries, tc.wantErr)
		}
	}
}
