package configcmd

import (
	"bytes"
	"os"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gwdiag/gwdiag/golden/configdump"
)

// TestAgentgatewayDump reads a dump in the reference implementation's shape
// (listeners and routes keyed by name, backend references by name or
// service), after checking the fixture against that project's published
// schema, so the summary is tested on what a real proxy answers.
func TestAgentgatewayDump(t *testing.T) {
	// The reference project's schema, as kept in the repo by refproxy's tests.
	const schemaPath = "../../../refproxy/config/testdata/schema/config_dump.schema.json"
	raw, err := os.ReadFile("testdata/agentgateway_dump.json")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := jsonschema.NewCompiler().Compile(schemaPath)
	if err != nil {
		t.Fatalf("compiling the reference schema: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Fatalf("fixture does not match the reference schema: %v", err)
	}
	d, err := configdump.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(d)
	if len(s.Routes) != 1 {
		t.Fatalf("got %d routes, want 1", len(s.Routes))
	}
	got := s.Routes[0]
	want := routeSummaryRow{Name: "httpbin", Namespace: "default", Key: "default/httpbin", Bind: "bind/3000", Listener: "listener0",
		Hostnames: []string{"httpbin.local"}, Matches: []string{`method="GET" pathPrefix=/`},
		Backends: []string{"default/httpbin", "default/httpbin.default.svc.cluster.local:8000"}, Policies: []string{"cors", "localRateLimit"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("route summary (-want +got):\n%s", diff)
	}
	out, err := run(t, "backends", "-f", "testdata/agentgateway_dump.json")
	if err != nil {
		t.Fatal(err)
	}
	golden.RequireEqual(t, []byte(out))
}
