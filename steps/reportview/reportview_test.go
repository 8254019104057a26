package reportview

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering (go test ./steps/reportview -update rewrites it); got:\n%s", path, got)
	}
}

func TestRender(t *testing.T) {
	r, err := Read("testdata/report.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		render func(io.Writer, *steps.ConformanceReport) error
		want   []string
	}{
		{"report.md", Markdown, []string{"FAILED", "Stopped early (`--fail-fast`)", "| standalone | ❌ failed (9 passed, 1 failed, 1 not run)",
			"- wanted: `[200 200 200 200 200 200 429]`", "- got: `statuses <in order>: [200 200 200 429 429 429 429]`"}},
		{"report.html", HTML, []string{`<table id="matrix">`, `<td class="failed">failed <small>0/1</small></td>`,
			"<dt>Wanted</dt><dd><code>[200 200 200 200 200 200 429]</code></dd>", "statuses &lt;in order&gt;:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.render(&b, r); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("%s lacks %q", tt.name, w)
				}
			}
			golden(t, tt.name, b.Bytes())
		})
	}
}

// TestHTMLSelfContained: the pages, of one report and of reports side by
// side, load nothing: no script, no link, no address of elsewhere.
func TestHTMLSelfContained(t *testing.T) {
	rs := reports(t, "report.yaml", "other-report.yaml")
	var one, side bytes.Buffer
	if err := HTML(&one, rs[0]); err != nil {
		t.Fatal(err)
	}
	if err := MatrixHTML(&side, rs); err != nil {
		t.Fatal(err)
	}
	for name, page := range map[string]string{"report": one.String(), "side-by-side": side.String()} {
		for _, bad := range []string{"<script", "<link", "src=", "http://", "https://", "@import"} {
			if strings.Contains(page, bad) {
				t.Errorf("the %s page has %q", name, bad)
			}
		}
	}
}

// TestReadRefusesOtherFiles: a file that is no gwdiag report is refused,
// named, with what is wrong: another kind, the Gateway API's report (a
// ConformanceReport of another apiVersion), no YAML.
func TestReadRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for file, want := range map[string]string{
		"kind: Pod\n": `x.yaml: kind "Pod", want a ConformanceReport`,
		"apiVersion: gateway.networking.k8s.io/v1\nkind: ConformanceReport\n": `x.yaml: a ConformanceReport of apiVersion "gateway.networking.k8s.io/v1", want gwdiag.dev/v1alpha1`,
		"<html>\n": "x.yaml: yaml: unmarshal errors",
	} {
		p := dir + "/x.yaml"
		os.WriteFile(p, []byte(file), 0o644)
		if _, err := Read(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", file, err, want)
		}
	}
}
