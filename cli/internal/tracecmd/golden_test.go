package tracecmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
)

// TestMain gives this test binary the goldens' fingerprint key, as a user
// sets GWDIAG_REDACT_KEY: its outputs are compared with the golden files
// byte for byte. (A process without it draws a random key: cli/internal/scrub's
// TestKey.)
func TestMain(m *testing.M) {
	os.Setenv(scrub.KeyEnv, goldenKey)
	os.Exit(m.Run())
}

// goldenKey is the goldens' fingerprint key (its README; redact.GoldenKey
// in golden/trace/redact's tests).
const goldenKey = "gwdiag redaction golden key"

// plantedGoldens are the DERIVED copies of real traces with credentials
// planted, and their redacted goldens (golden/trace/redact/testdata).
const plantedGoldens = "../../../golden/trace/redact/testdata/agentgateway/"

// TestRealTracesAsBefore: the real proxy's traces and agctl's inputs
// replay, diff and explain the same with redaction (the default) as
// without, and trace redact gives their bytes: there is nothing in them
// to redact, and nothing else is touched.
func TestRealTracesAsBefore(t *testing.T) {
	files, _ := filepath.Glob(realTraces + "*")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".md") {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			in := readFile(t, f)
			out, stderr, err := runTrace(t, "redact", f)
			if err != nil || out != in || !strings.Contains(stderr, ", 0 redacted;") || !strings.HasSuffix(stderr, ", 0 changed\n") {
				t.Errorf("trace redact: %v, stderr %q, output the same bytes: %v", err, stderr, out == in)
			}
			for _, args := range [][]string{{"-f", f, "--raw"}, {"explain", "-f", f, "-v"}, {"explain", "-f", f, "-o", "json"}, {"diff", f, f}} {
				redacted, _, rerr := runTrace(t, args...)
				clear, _, cerr := runTrace(t, append(args, "--redact=false")...)
				if redacted != clear || exitcode.Code(rerr) != exitcode.Code(cerr) || (rerr == nil) != (cerr == nil) || rerr != nil && rerr.Error() != cerr.Error() {
					t.Errorf("trace %v: redacted and not, the outputs differ:\n%s (%v)\n---\n%s (%v)", args, redacted, rerr, clear, cerr)
				}
			}
		})
	}
	if n != 11 {
		t.Errorf("%d real traces, want 11", n)
	}
}

// TestGoldenRedactionCLI: gwdiag trace redact writes the goldens byte for
// byte (GWDIAG_REDACT_KEY set); trace -f --raw prints their events; a
// planted capture and its redacted copy diff equal; and no output holds a
// planted credential.
func TestGoldenRedactionCLI(t *testing.T) {
	planted := []string{"sk-golden-4f1e9a0c7d3b", "golden-ck-2b8e5d71", "golden-xk-a6c0f3e19d52", "golden-bs-7d20c4e8b1f6"}
	for _, name := range []string{"k8s-latest.DERIVED-credentials.jsonl", "k8s-latest.DERIVED-credentials.sse", "standalone-latest.DERIVED-credentials.docs.jsonl"} {
		t.Run(name, func(t *testing.T) {
			f, golden := plantedGoldens+name, readFile(t, plantedGoldens+name+".redacted")
			var all strings.Builder
			out, stderr, err := runTrace(t, "redact", f)
			if err != nil || out != golden {
				t.Errorf("trace redact: %v\n got  %s\n want %s", err, out, golden)
			}
			all.WriteString(out + stderr)
			// --raw prints the events the golden holds, as it holds them.
			raw, stderr, err := runTrace(t, "-f", f, "--raw")
			all.WriteString(raw + stderr)
			var events []string
			for _, l := range strings.Split(golden, "\n") {
				l = strings.TrimPrefix(l, "data: ")
				if json.Valid([]byte(l)) && strings.HasPrefix(l, "{") {
					events = append(events, l)
				}
			}
			if raw != strings.Join(events, "\n")+"\n" {
				t.Errorf("trace -f --raw (%v):\n got  %s\n want %s", err, raw, strings.Join(events, "\n"))
			}
			if strings.Contains(name, "docs") != (err != nil) {
				t.Errorf("trace -f --raw: error %v (the docs' elided lines are an error)", err)
			}
			// A capture and its redacted copy are the same trace.
			redactedCopy := filepath.Join(t.TempDir(), name)
			os.WriteFile(redactedCopy, []byte(golden), 0o600)
			diff, stderr, err := runTrace(t, "diff", f, redactedCopy)
			all.WriteString(diff + stderr)
			if diff != "" || (err != nil) != strings.Contains(name, "docs") {
				t.Errorf("trace diff of a capture and its redacted copy: %v\n%s", err, diff)
			}
			explained, stderr, _ := runTrace(t, "explain", "-f", f, "-v", "-o", "json")
			all.WriteString(explained + stderr)
			for _, p := range planted {
				if strings.Contains(all.String(), p) {
					t.Errorf("gwdiag wrote %s:\n%s", p, all.String())
				}
			}
			if !bytes.Contains([]byte(golden), []byte("<redacted:")) {
				t.Error("the golden shows nothing redacted")
			}
		})
	}
}
