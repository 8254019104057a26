package redact

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGoldenRedaction")

// GoldenKey is the fingerprint key of the golden redactions
// (testdata/agentgateway/*.redacted): GWDIAG_REDACT_KEY in the tests of
// the gwdiag binary that read them.
const GoldenKey = "gwdiag redaction golden key"

// goldenPlanted are the credentials planted in the goldens' captures
// (testdata/agentgateway/README.md).
var goldenPlanted = []string{"sk-golden-4f1e9a0c7d3b", "golden-ck-2b8e5d71", "golden-xk-a6c0f3e19d52", "golden-bs-7d20c4e8b1f6"}

// realTraces are the real proxy's traces and agctl's test inputs.
func realTraces(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../sse/testdata/agentgateway/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			out = append(out, f)
		}
	}
	if len(out) != 11 {
		t.Fatalf("found %d real traces, want the 11 of ../sse/testdata/agentgateway", len(out))
	}
	return out
}

// TestRealTracesUnchanged: the real proxy's traces and agctl's inputs
// hold no credential, and a redacted copy is the same bytes, elided
// lines, uppercase INFO and SSE framing included.
func TestRealTracesUnchanged(t *testing.T) {
	for _, f := range realTraces(t) {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		stats, err := NewStream(New(Options{})).Capture(&out, bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(out.Bytes(), in) || stats.Redacted != 0 || stats.OtherChanged != 0 || stats.Events == 0 {
			t.Errorf("%s: redacting changed it (%+v):\n%s", f, stats, out.Bytes())
		}
	}
}

// TestGoldenRedaction: the DERIVED copies of a real cluster trace (JSON
// Lines and SSE) and of a standalone one as the docs print it (elided
// lines) redact to their golden files under GoldenKey: every planted
// credential replaced by its fingerprint, the scheme, cookie names and
// set-cookie attributes kept, the key echoed in a later event scrubbed
// too, and every line without a plant the same bytes.
func TestGoldenRedaction(t *testing.T) {
	files, _ := filepath.Glob("testdata/agentgateway/*.DERIVED-credentials.*")
	var planted []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".redacted") {
			planted = append(planted, f)
		}
	}
	if len(planted) != 3 {
		t.Fatalf("found %v, want the three planted captures", planted)
	}
	for _, f := range planted {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			stats, err := NewStream(New(Options{Key: []byte(GoldenKey)})).Capture(&out, bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			golden := f + ".redacted"
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("redacted %s differs from %s:\n%s", f, golden, out.Bytes())
			}
			if stats.Redacted+stats.OtherChanged == 0 {
				t.Errorf("nothing redacted: %+v", stats)
			}
			for _, p := range goldenPlanted {
				if bytes.Contains(want, []byte(p)) {
					t.Errorf("%s holds %s", golden, p)
				}
			}
			inLines, outLines := strings.Split(string(in), "\n"), strings.Split(string(want), "\n")
			if len(inLines) != len(outLines) {
				t.Fatalf("%d lines in, %d out", len(inLines), len(outLines))
			}
			for i, l := range inLines {
				hasPlant := false
				for _, p := range goldenPlanted {
					hasPlant = hasPlant || strings.Contains(l, p)
				}
				if hasPlant == (l == outLines[i]) {
					t.Errorf("line %d: planted %v, changed %v:\n in  %s\n out %s", i+1, hasPlant, l != outLines[i], l, outLines[i])
				}
			}
			for _, kept := range []string{"Bearer <redacted:", "session=<redacted:", "theme=<redacted:", "; Path=/; HttpOnly; SameSite=Lax", `"x-echo-api-key":"<redacted:`} {
				if !bytes.Contains(want, []byte(kept)) {
					t.Errorf("%s lacks %q", golden, kept)
				}
			}
		})
	}
}
