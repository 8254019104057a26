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

// TestHTMLSelfContained: the page loads nothing: no script, no link, no
// address of elsewhere.
func TestHTMLSelfContained(t *testing.T) {
	r, err := Read("testdata/report.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "<link", "src=", "http://", "https://", "@import"} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("the page has %q", bad)
		}
	}
}

func TestReadRefusesOtherFiles(t *testing.T) {
	p := t.TempDir() + "/x.yaml"
	os.WriteFile(p, []byte("kind: Pod\n"), 0o644)
	if _, err := Read(p); err == nil || !strings.Contains(err.Error(), `kind "Pod", want a ConformanceReport`) {
		t.Errorf("got %v, want an error naming the kind", err)
	}
}
