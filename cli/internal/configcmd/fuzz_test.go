package configcmd

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/cli/internal/whatif"
	"github.com/gwdiag/gwdiag/golden/configdump"
)

// FuzzDumpReader feeds arbitrary documents to the dump reader: it must
// answer (a dump or an error) without panicking; a document it reads must
// summarise and render, and answer a what-if (config explain) with a
// verdict or an error; and what -o json and -o yaml write of it must read
// back to the same summary and the same backend rows, written twice the
// same.
func FuzzDumpReader(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/agentgateway/*.json")
	more, _ := filepath.Glob("testdata/agentgateway/*.yaml")
	seeds = append(seeds, more...)
	seeds = append(seeds, "testdata/dump.json", "testdata/agentgateway_dump.json")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{}`, `{"backends":[{"backend":{"ai":{"target":{"providers":[{"active":{"a":{}}}]}}}}]}`,
		`{"services":[{"endpoints":[{"rejected":{"/":{"info":{"evictedUntil":"x"}}}}]}]}`,
		`{"policies":[{"target":{"gateway":null},"policy":{"frontend":[]}}]}`,
		"binds: []\nroutes: {httpMesh: {a: {b: {key: k}}}}\n", "- 1", "", "{", `{"services": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := configdump.Parse(in)
		if err != nil {
			return
		}
		sum := summarize(d)
		rows := backendRows(d, true)
		if err := writeSummary(&bytes.Buffer{}, sum); err != nil {
			t.Fatalf("WriteSummary: %v", err)
		}
		if err := writeBackends(&bytes.Buffer{}, rows, "short"); err != nil {
			t.Fatalf("WriteBackends: %v", err)
		}
		req := whatif.Request{Method: "GET", Host: "httpbin.local", Path: "/headers", Header: http.Header{"X-A": {"1"}}}
		if res, err := whatif.Evaluate(d, req); err == nil {
			if err := describe(req, res, scrub.Default()).write(&bytes.Buffer{}); err != nil {
				t.Fatalf("config explain: %v", err)
			}
		}
		g, err := configdump.Generic(in)
		if err != nil {
			t.Fatalf("Parse read the document, Generic did not: %v", err)
		}
		for _, format := range []string{"json", "yaml"} {
			var saved bytes.Buffer
			if err := writeDump(&saved, g, format); err != nil {
				// A document whose values have no YAML or JSON form (e.g.
				// a number JSON cannot hold) is refused, not mangled.
				continue
			}
			back, err := configdump.Parse(saved.Bytes())
			if err != nil {
				t.Fatalf("-o %s output does not read back: %v\n%s", format, err, saved.Bytes())
			}
			if diff := cmp.Diff(sum, summarize(back)); diff != "" {
				t.Fatalf("summary after -o %s round trip (-before +after):\n%s", format, diff)
			}
			if format == "json" {
				// YAML may shorten floats; JSON keeps every digit.
				if diff := cmp.Diff(rows, backendRows(back, true)); diff != "" {
					t.Fatalf("rows after -o json round trip (-before +after):\n%s", diff)
				}
			}
			g2, err := configdump.Generic(saved.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			var again bytes.Buffer
			if err := writeDump(&again, g2, format); err != nil || !bytes.Equal(again.Bytes(), saved.Bytes()) {
				t.Fatalf("-o %s of its own output differs (%v):\nfirst\n%s\nsecond\n%s", format, err, saved.Bytes(), again.Bytes())
			}
		}
	})
}
