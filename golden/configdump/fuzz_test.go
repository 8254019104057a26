package configdump

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds arbitrary documents to the reader: it must answer (a dump
// or an error) without panicking, Generic must accept what Parse accepts,
// and a dump read must keep its endpoints through both ways of writing it
// out again (the generic values, the typed model). The seeds are the real
// dumps the CLI's tests use. cli/internal/configcmd's FuzzDumpReader adds the
// rendering; this one is small enough to fuzz fast.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("../../cli/internal/configcmd/testdata/agentgateway/*.json")
	yamls, _ := filepath.Glob("../../cli/internal/configcmd/testdata/agentgateway/*.yaml")
	for _, s := range append(seeds, yamls...) {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{}`, `{"backends":[{"backend":{"ai":{"target":{"providers":[{"active":{"a/b/":{}}}]}}}}]}`,
		`{"services":[{"endpoints":[{"rejected":{"/":{"info":{"evictedUntil":"x","total_requests":1}}}}]}]}`,
		"services:\n- endpoints:\n  - active: {x: {info: {health: 1}}}\n", "- 1", "", "{", `{"services": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Parse(in)
		if err != nil {
			return
		}
		eps := d.Endpoints()
		g, err := Generic(in)
		if err != nil {
			t.Fatalf("Parse read the document, Generic did not: %v", err)
		}
		for name, out := range map[string]any{"generic": g, "typed": d} {
			b, err := json.Marshal(out)
			if err != nil {
				continue // e.g. a number JSON cannot hold: refused, not mangled
			}
			back, err := Parse(b)
			if err != nil {
				t.Fatalf("the %s dump written out does not read back: %v\n%s", name, err, b)
			}
			if diff := cmp.Diff(eps, back.Endpoints()); diff != "" {
				t.Fatalf("endpoints after a %s round trip (-before +after):\n%s", name, diff)
			}
		}
	})
}
