package reportview

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps"
)

// reports reads the test reports, a column each.
func reports(t *testing.T, paths ...string) []*steps.ConformanceReport {
	t.Helper()
	var rs []*steps.ConformanceReport
	for _, p := range paths {
		r, err := Read("testdata/" + p)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func render(t *testing.T, f func(io.Writer, []*steps.ConformanceReport) error, rs []*steps.ConformanceReport) string {
	t.Helper()
	var b bytes.Buffer
	if err := f(&b, rs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestMatrix: two implementations side by side, a failed run with claims
// over two profiles and a passed one of the standalone profile that claims
// nothing. Each row has the cell of each report: a claimed extended feature
// that failed, one unsupported and not claimed, a feature one report lacks,
// a profile one report did not run.
func TestMatrix(t *testing.T) {
	rs := reports(t, "report.yaml", "other-report.yaml")
	for _, tt := range []struct {
		name   string
		render func(io.Writer, []*steps.ConformanceReport) error
		want   []string
	}{
		{"matrix.md", MatrixMarkdown, []string{
			"## gwdiag conformance: 2 reports side by side\n",
			"| Profile | Feature | **faulty-inprocess**<br>inprocess target, 2026-11-25 18:25 UTC<br>FAILED<br>gwdiag dev (f768dd6a0b1c), features v0.2.0 (c174668a04c2) | " +
				"**acme-gateway 1.4.0**<br>container target, 2026-12-01 09:30 UTC<br>PASSED<br>gwdiag v0.9.0 (0123456789ab), features v0.2.0 (c174668a04c2) |\n|---|---|---|---|\n",
			"| standalone | **core result** | ❌ failed (9 passed, 1 failed, 1 not run) | ✅ passed (14 passed, 0 failed) |\n",
			"| standalone | request-limits | ❌ failed 3/5 | ✅ passed 5/5 |\n",
			"| standalone | trace-order | — | ✅ passed 3/3 |\n",
			"| standalone | admin-error-status (extended) | ✅ passed 3/3 · claimed | 🟡 unsupported 1/3 · not claimed |\n",
			"| standalone | config-dump-layout (extended) | ❌ failed 0/1 · claimed | ✅ passed 1/1 · not claimed |\n",
			"| cluster | **core result** | 🟡 partial (1 passed, 0 failed, 1 skipped, 1 not run) | — |\n",
			"| cluster | condition-status | ⏹️ not run 1/2 | — |\n",
		}},
		{"matrix.html", MatrixHTML, []string{
			`<table id="side-by-side">`,
			`<th>acme-gateway 1.4.0<br><small>container target · 2026-12-01 09:30 UTC</small><br><span class="verdict v-PASSED">PASSED</span>`,
			`<tr><th class="profile" colspan="3">standalone profile</th></tr>`,
			`<tr><td>trace-order</td><td class="empty">—</td><td class="passed">passed <small>3/3</small></td></tr>`,
			`<tr><td>config-dump-layout <small>extended</small></td><td class="failed">failed <small>0/1</small> <small>· claimed</small></td><td class="passed">passed <small>1/1</small> <small>· not claimed</small></td></tr>`,
			`<tr><td>admin-error-status <small>extended</small></td><td class="passed">passed <small>3/3</small> <small>· claimed</small></td><td class="unsupported">unsupported <small>1/3</small> <small>· not claimed</small></td></tr>`,
			`<tr><td><b>core result</b></td><td class="partial">partial <small>(1 passed, 0 failed, 1 skipped, 1 not run)</small></td><td class="empty">—</td></tr>`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := render(t, tt.render, rs)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s lacks %q", tt.name, w)
				}
			}
			// Rows by profile, its core result first, core features
			// before extended ones.
			order := []string{"standalone", "core result", "admin", "request-limits", "trace-order", "admin-error-status", "config-dump-layout", "cluster", "core result", "condition-status"}
			rest := got[strings.Index(got, "side by side")+len("side by side"):]
			for _, w := range order {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%s: %q out of order", tt.name, w)
				}
				rest = rest[i+len(w):]
			}
			if strings.Contains(got, "Not comparable") {
				t.Errorf("%s flags reports of one feature set as not comparable", tt.name)
			}
			if again := render(t, tt.render, rs); again != got {
				t.Errorf("%s: a second rendering differs", tt.name)
			}
			golden(t, tt.name, []byte(got))
		})
	}
}

// TestMatrixColumns: the columns come in the order given, and the same
// implementation, version and target twice makes two columns told apart.
func TestMatrixColumns(t *testing.T) {
	md := render(t, MatrixMarkdown, reports(t, "other-report.yaml", "report.yaml", "other-report.yaml"))
	a, b, c := strings.Index(md, "**acme-gateway 1.4.0**"), strings.Index(md, "**faulty-inprocess**"), strings.Index(md, "**acme-gateway 1.4.0 (2)**")
	if a < 0 || b < a || c < b {
		t.Errorf("columns: acme at %d, faulty at %d, acme (2) at %d, want them in that order\n%s", a, b, c, md)
	}
	if !strings.Contains(md, "| standalone | trace-order | ✅ passed 3/3 | — | ✅ passed 3/3 |\n") {
		t.Errorf("the trace-order row lacks a cell per column:\n%s", md)
	}
}

// TestMatrixFeatureSets: reports of different feature sets (another set,
// or the same set's name with another digest) are flagged under the
// table, with each column's set.
func TestMatrixFeatureSets(t *testing.T) {
	for _, tt := range []struct{ set, digest string }{{"v0.3.0", "9f1e2d3c4b5a"}, {"v0.2.0", "9f1e2d3c4b5a"}} {
		rs := reports(t, "report.yaml", "other-report.yaml")
		rs[1].Producer.FeatureSet, rs[1].Producer.FeatureDigest = tt.set, tt.digest
		note := "Not comparable: these reports ran different feature sets (faulty-inprocess: v0.2.0 (c174668a04c2); acme-gateway 1.4.0: " +
			tt.set + " (" + tt.digest + ")), so a feature may not hold the same scenarios in each."
		md := render(t, MatrixMarkdown, rs)
		if !strings.HasSuffix(md, "\n> **"+note+"**\n") {
			t.Errorf("%s: the markdown does not end with the note:\n%s", tt.set, md)
		}
		html := render(t, MatrixHTML, rs)
		if !strings.Contains(html, "</table>\n") || !strings.Contains(html, `<p class="note">`+note+"</p>") {
			t.Errorf("%s: the page lacks the note:\n%s", tt.set, html)
		}
	}
}

// TestMatrixEscapes: a name with a pipe or markup does not break the
// table or the page.
func TestMatrixEscapes(t *testing.T) {
	rs := reports(t, "report.yaml", "other-report.yaml")
	rs[1].Implementation.Name = "a|b <i>"
	if md := render(t, MatrixMarkdown, rs); !strings.Contains(md, `**a\|b &lt;i&gt; 1.4.0**`) {
		t.Errorf("markdown: the name is not escaped:\n%s", md)
	}
	if html := render(t, MatrixHTML, rs); !strings.Contains(html, "<th>a|b &lt;i&gt; 1.4.0<br>") {
		t.Errorf("html: the name is not escaped:\n%s", html)
	}
}

// TestMatrixDocumented: the example in docs/ci.md is the matrix of the
// test reports as rendered today (testdata/matrix.md's table).
func TestMatrixDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ci.md")
	if err != nil {
		t.Fatal(err)
	}
	md := render(t, MatrixMarkdown, reports(t, "report.yaml", "other-report.yaml"))
	table := md[strings.Index(md, "| Profile |"):strings.Index(md, "\n\nn/m:")]
	if !strings.Contains(string(doc), table) {
		t.Errorf("docs/ci.md lacks the matrix of the test reports; it is now:\n%s", table)
	}
}

// TestMatrixBaselineAndRepeat: the results of --repeat and --baseline
// runs: a flaky feature fails, an expected failure does not, and both
// count their scenarios.
func TestMatrixBaselineAndRepeat(t *testing.T) {
	rs := reports(t, "report.yaml", "other-report.yaml")
	f := rs[1].Features
	f[0].Result, f[0].Passed, f[0].Flaky = steps.Flaky, 5, 1                      // admin
	f[3].Result, f[3].Passed, f[3].ExpectedFailures = steps.ExpectedFailure, 4, 1 // request-limits
	rs[1].Profiles[0].Core = steps.CoreResult{Result: steps.Flaky, Counts: steps.Counts{Passed: 12, Flaky: 1, ExpectedFailures: 1}}
	md := render(t, MatrixMarkdown, rs)
	for _, want := range []string{"| standalone | **core result** | ❌ failed (9 passed, 1 failed, 1 not run) | ❌ flaky (12 passed, 0 failed, 1 flaky, 1 expected failures) |\n",
		"| standalone | admin | ✅ passed 6/6 | ❌ flaky 5/6 |\n", "| standalone | request-limits | ❌ failed 3/5 | 🟡 expected failure 4/5 |\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	html := render(t, MatrixHTML, rs)
	for _, want := range []string{`<td class="flaky">flaky <small>5/6</small></td>`, `<td class="expected failure">expected failure <small>4/5</small></td>`,
		"td.expected.failure { background: #fff8c5; border: 1px solid #d0d7de;"} {
		if !strings.Contains(html, want) {
			t.Errorf("html lacks %q:\n%s", want, html)
		}
	}
}
