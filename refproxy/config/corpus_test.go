package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpus are the 55 real standalone configs of the reference
// implementation (testdata/corpus, each with its source in its first
// comment): its examples, its loader's test fixtures and its docs' rate
// limit and tracing pages. Every one validates against its published
// schema. Each is served (with these route keys) or refused naming the
// features refproxy does not implement, at these paths; none is an
// unknown field.
var corpus = []struct {
	file    string
	refused []string // the paths refused, in the order of the file
	routes  []string // when served: every route key, in order
}{
	{"examples__fault-injection__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.delay", "binds[0].listeners[0].routes[1].policies.delay", "binds[0].listeners[0].routes[2].policies.directResponse.conditional"}, nil},
	{"examples__llm-basic__config.yaml", []string{"frontendPolicies.http", "llm.models[1].provider", "llm.models[1].transformation"}, nil},
	{"examples__llm-cost-routing__config.yaml", []string{"llm.virtualModels"}, nil},
	{"examples__llm-ollama-postgres__config.yaml", []string{"llm.models[0].provider"}, nil},
	{"examples__llm-prompt-enrichment__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.ai"}, nil},
	{"examples__llm-prompt-guard__azure-content-safety-config.yaml", []string{"binds[0].listeners[0].routes[0].policies.ai"}, nil},
	{"examples__llm-prompt-guard__bedrock-config.yaml", []string{"binds[0].listeners[0].routes[0].policies.ai"}, nil},
	{"examples__llm-prompt-guard__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.ai"}, nil},
	{"examples__llm-prompt-guard__model-armor-config.yaml", []string{"binds[0].listeners[0].routes[0].policies.ai"}, nil},
	{"examples__llm-standalone-epp__config.yaml", []string{"services", "binds[0].listeners[0].routes[0].backends[0].service", "binds[0].listeners[0].routes[0].backends[0].policies.inferenceRouting"}, nil},
	{"examples__mcp-apps__config-multiplex.yaml", []string{"mcp"}, nil},
	{"examples__mcp-apps__config.yaml", []string{"mcp"}, nil},
	{"examples__mcp-authentication__config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].mcp", "binds[0].listeners[0].routes[0].policies.mcpAuthentication", "binds[0].listeners[0].routes[1].backends[0].mcp", "binds[0].listeners[0].routes[1].policies.mcpAuthentication", "binds[0].listeners[0].routes[2].backends[0].mcp", "binds[0].listeners[0].routes[2].policies.mcpAuthentication"}, nil},
	{"examples__mcp-authorization__config.yaml", []string{"mcp"}, nil},
	{"examples__mcp-basic__config.yaml", []string{"mcp"}, nil},
	{"examples__mcp-multiplex__config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].mcp"}, nil},
	{"examples__mcp-openapi__config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].mcp"}, nil},
	{"examples__mcp-telemetry__config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].mcp"}, nil},
	{"examples__mcp-tls__config.yaml", []string{"binds[0].listeners[0].protocol", "binds[0].listeners[0].tls", "binds[0].listeners[0].routes[0].backends[0].mcp"}, nil},
	{"examples__traffic-a2a__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.a2a"}, nil},
	{"examples__traffic-aws-agentcore__config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].aws", "binds[0].listeners[0].routes[0].backends[0].policies.requestHeaderModifier"}, nil},
	{"examples__traffic-egress-proxy__config-dynamic-tls.yaml", []string{"binds[0].tunnelProtocol", "binds[1].mode", "binds[1].listeners[0].protocol", "binds[1].listeners[0].tls", "binds[1].listeners[0].routes[0].backends[0].dynamic", "binds[1].listeners[0].routes[0].backends[0].policies.backendTLS", "binds[1].listeners[0].routes[0].policies.transformations"}, nil},
	{"examples__traffic-egress-proxy__config.yaml", []string{"binds[0].tunnelProtocol", "gateways.secure.listeners[0].protocol", "tcpRoutes"}, nil},
	{"examples__traffic-http__config.yaml", []string{"binds[0].listeners[0].routes[1].policies.urlRewrite", "binds[0].listeners[0].routes[1].policies.requestMirror", "binds[0].listeners[0].routes[1].policies.retry", "binds[0].listeners[0].routes[1].policies.timeout"}, nil},
	{"examples__traffic-jwt-sign__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.backendAuth.jwtSign"}, nil},
	{"examples__traffic-oauth2-proxy__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.urlRewrite", "binds[0].listeners[0].routes[1].policies.extAuthz"}, nil},
	{"examples__traffic-oidc__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.oidc"}, nil},
	{"examples__traffic-ratelimiting-global__config.yaml", nil, []string{"default/default/bind/3000/listener0/default/route0"}},
	{"examples__traffic-ratelimiting-local__config.yaml", nil, []string{"default/default/bind/3000/listener0/default/route0"}},
	{"examples__traffic-spiffe__config.yaml", []string{"binds[0].listeners[0].protocol", "binds[0].listeners[0].tls", "binds[0].listeners[0].routes[0].policies.directResponse.bodyExpression", "binds[1].listeners[0].routes[0].policies.backendTLS"}, nil},
	{"examples__traffic-tailscale-auth__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.extAuthz"}, nil},
	{"examples__traffic-token-exchange__extauthz__config.yaml", []string{"binds[0].listeners[0].routes[0].policies.extAuthz", "binds[0].listeners[0].routes[0].policies.transformations", "binds[0].listeners[0].routes[1].policies.extAuthz", "binds[0].listeners[0].routes[1].policies.transformations"}, nil},
	{"examples__traffic-token-exchange__jwt-authz-grant__config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].policies.backendAuth.oauthTokenExchange", "binds[0].listeners[0].routes[1].backends[0].policies.backendAuth.oauthTokenExchange", "binds[0].listeners[0].routes[2].backends[0].policies.backendAuth.oauthTokenExchange"}, nil},
	{"examples__traffic-token-exchange__oauth-rfc8693__config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].policies.backendAuth.oauthTokenExchange"}, nil},
	{"examples__traffic-unified-gateway__config.yaml", []string{"llm.models[1].provider", "llm.models[1].transformation", "llm.virtualModels", "mcp", "ui"}, nil},
	{"local_tests__aws_config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].aws"}, nil},
	{"local_tests__backend_auth_credentials_config.yaml", nil, []string{"default/default/bind/8080/http/default/route0", "default/default/bind/8080/http/default/route1"}},
	{"local_tests__basic_config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].mcp"}, nil},
	{"local_tests__gateway_config.yaml", nil, []string{"default/default/bind/12345/listener0/default/route0", "default/default/bind/12345/listener0/default/route1", "default/default/bind/12346/listener0/default/route0", "default/default/bind/12346/listener0/default/route1", "default/default/bind/12347/a/default/route0"}},
	{"local_tests__llm_config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].ai.groups"}, nil},
	{"local_tests__llm_provider_reference_config.yaml", []string{"llm.providers[0].defaults", "llm.providers[1].provider.custom", "llm.models[0].provider", "llm.models[0].health", "llm.models[0].promptCaching"}, nil},
	{"local_tests__llm_simple_config.yaml", []string{"llm.policies.guardrails", "llm.models[0].provider", "llm.models[0].responseHeaders", "llm.models[0].health", "llm.models[0].promptCaching", "llm.models[0].guardrails", "llm.models[1].provider", "llm.models[1].params.vertexRegion", "llm.models[1].params.vertexProject", "llm.models[2].provider", "llm.models[2].params.azureResourceName", "llm.models[2].params.azureResourceType", "llm.models[2].params.azureApiVersion", "llm.models[4].provider", "llm.models[5].provider"}, nil},
	{"local_tests__llm_virtual_model_conditional_config.yaml", []string{"llm.models[0].transformation", "llm.virtualModels"}, nil},
	{"local_tests__llm_virtual_model_config.yaml", []string{"llm.models[0].provider", "llm.models[0].transformation", "llm.virtualModels"}, nil},
	{"local_tests__mcp_config.yaml", []string{"binds[0].listeners[0].routes[0].policies.mcpAuthorization", "binds[0].listeners[0].routes[0].backends[0].mcp"}, nil},
	{"local_tests__mcp_simple_config.yaml", []string{"mcp"}, nil},
	{"local_tests__mcp_to_aws_backend_config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].backend", "backends"}, nil},
	{"local_tests__named_mcp_backend_config.yaml", []string{"binds[0].listeners[0].routes[0].backends[0].backend", "backends"}, nil},
	{"website__rate-limits__L225.yaml", []string{"mcp"}, nil},
	{"website__rate-limits__L428.yaml", nil, []string{"llm:request"}},
	{"website__rate-limits__L43.yaml", nil, []string{"llm:request"}},
	{"website__rate-limits__L60.yaml", []string{"mcp"}, nil},
	{"website__rate-limits__L78.yaml", nil, []string{"default/default/bind/3000/listener0/default/route0"}},
	{"website__trace-requests-standalone-12x__L35.yaml", nil, []string{"default/default/bind/3000/listener0/default/httpbin"}},
	{"website__trace-requests-standalone__L35.yaml", nil, []string{"default/default/bind/3000/listener0/default/httpbin"}},
}

func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 55 || len(corpus) != len(files) {
		t.Fatalf("%d corpus files, %d table entries; want 55 of each", len(files), len(corpus))
	}
	served := 0
	features := map[string]int{}
	for _, tt := range corpus {
		t.Run(strings.TrimSuffix(tt.file, ".yaml"), func(t *testing.T) {
			path := filepath.Join("testdata/corpus", tt.file)
			if _, err := os.Stat(path); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if tt.refused == nil {
				if err != nil {
					t.Fatalf("refused, want served:\n%v", err)
				}
				served++
				if got := routeKeys(cfg); !slices.Equal(got, tt.routes) {
					t.Errorf("route keys\n got: %q\nwant: %q", got, tt.routes)
				}
				return
			}
			if err == nil {
				t.Fatalf("served, want refused at %q", tt.refused)
			}
			if strings.Contains(err.Error(), "unknown field") {
				t.Errorf("a schema-valid config is never an unknown field:\n%v", err)
			}
			if !IsNotImplemented(err) {
				t.Errorf("want only features refproxy does not implement:\n%v", err)
			}
			var got []string
			for _, e := range allErrors(err) {
				got = append(got, e.Path)
				if !strings.HasPrefix(e.Error(), path+":") {
					t.Errorf("%q does not name the file and line", e.Error())
				}
				p := e.Path
				if i := strings.LastIndexAny(p, ".]"); i >= 0 {
					p = p[i+1:]
				}
				features[p]++
			}
			if !slices.Equal(got, tt.refused) {
				t.Errorf("refused\n got: %q\nwant: %q\n%v", got, tt.refused, err)
			}
		})
	}
	t.Logf("served %d of %d; refused features (places): %v", served, len(corpus), features)
}

// TestCorpusTracing: the real configs that set config.tracing (OpenTelemetry
// export) are served with it applied, not ignored: their collector, and
// randomSampling: true.
func TestCorpusTracing(t *testing.T) {
	for _, name := range []string{"examples__traffic-ratelimiting-local__config.yaml", "examples__traffic-ratelimiting-global__config.yaml"} {
		cfg, err := Load("testdata/corpus/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Ignored) != 0 {
			t.Errorf("%s: Ignored = %+v, want nothing", name, cfg.Ignored)
		}
		tr := cfg.Config.Tracing
		if tr == nil || tr.OTLPEndpoint != "http://localhost:4317" || tr.RandomSampling == nil || tr.RandomSampling.Ratio != 1 || tr.ClientSampling != nil {
			t.Errorf("%s: tracing %+v, want the collector at http://localhost:4317, every request sampled", name, tr)
		}
		if oc := tr.OTLP(); oc.Validate() != nil || oc.Protocol != "" {
			t.Errorf("%s: export config %+v: %v", name, oc, oc.Validate())
		}
	}
}

func routeKeys(cfg *Config) []string {
	var keys []string
	for _, b := range cfg.Binds {
		for li, l := range b.Listeners {
			for ri, r := range l.Routes {
				keys = append(keys, RouteKey(b, l, li, r, ri))
			}
		}
	}
	return keys
}

// allErrors lists the *Error values in err.
func allErrors(err error) []*Error {
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return []*Error{e}
	}
	return nil
}
