// Package docs holds the project's documentation; its tests hold the code
// to what docs/ARCHITECTURE.md says of the layout: the floors and the
// arrows between them, and the files the document names.
package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gwdiag/gwdiag/"

// floors are the top-level folders from the ground up (ARCHITECTURE.md,
// "The house"): a non-test file imports only from its own folder and the
// floors below it, so every arrow points down and there is no cycle.
var floors = map[string]int{
	"golden":   1,
	"features": 1,
	"refproxy": 2,
	"clusters": 3,
	"steps":    4,
	"cli":      5,
}

// refproxyDebts are the non-test imports of a refproxy package from
// outside refproxy/ beyond package refproxy itself. Each is there to run
// or embed the reference proxy, which is what such an import may be for:
// the controller deploys refproxy with a config it writes and checks, a
// test fixture and the in-process target start it. A contract the proxy
// shares with its clients belongs under golden/ instead. A new import
// fails TestArrowsPointDown; a listed one that is gone fails it too, so
// the list only shrinks.
var refproxyDebts = []string{
	// The reference controller writes and checks refproxy's config.
	"clusters/controller/global.go -> refproxy/config",
	"clusters/controller/global.go -> refproxy/ratelimit/remote",
	"clusters/controller/translate.go -> refproxy/config",
	"clusters/controller/validate.go -> refproxy/celexpr",
	"clusters/controller/validate.go -> refproxy/ratelimit",
	// A test helper of gwdiag's connect tests starts refproxy with a
	// config of its own.
	"cli/internal/connect/connecttest/fixture.go -> refproxy/config/configtest",
	"cli/internal/connect/connecttest/fixture.go -> refproxy/refproxytest",
	// The in-process target hands refproxy its config, and the standalone
	// config is written with refproxy's rate-limit types.
	"steps/targets/inprocess/inprocess.go -> refproxy/config",
	"steps/targets/local/standalone.go -> refproxy/ratelimit",
}

// sourceFiles returns the non-test Go files of the module (goFiles).
func sourceFiles(t *testing.T, root string) []string {
	t.Helper()
	return slices.DeleteFunc(goFiles(t, root), func(rel string) bool { return strings.HasSuffix(rel, "_test.go") })
}

// goFiles returns the Go files of the module, tests too, relative to
// root with slashes: hidden folders, testdata and nested modules (the
// tools modules) left out.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // a nested module (tools)
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// imports returns "file -> package" for every import of a project
// package in a non-test Go file of the module (sourceFiles).
func imports(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	for _, rel := range sourceFiles(t, root) {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if pkg, ok := strings.CutPrefix(p, module); ok {
				out = append(out, rel+" -> "+pkg)
			}
		}
	}
	slices.Sort(out)
	return out
}

func top(path string) string { return strings.SplitN(path, "/", 2)[0] }

// violations returns what breaks the rules among imports ("file ->
// package"), given the debts allowed.
func violations(all, allowed []string) []string {
	var out []string
	debts := map[string]bool{}
	for _, d := range allowed {
		debts[d] = false
	}
	for _, a := range all {
		file, pkg, _ := strings.Cut(a, " -> ")
		from, to := top(file), top(pkg)
		fl, ok := floors[from]
		if !ok {
			out = append(out, fmt.Sprintf("%s: folder %s/ has no floor (add it to floors and to ARCHITECTURE.md)", file, from))
			continue
		}
		if tf, ok := floors[to]; !ok || (from != to && tf >= fl) {
			out = append(out, fmt.Sprintf("%s imports %s: %s/ (floor %d) may import only the floors below it, not %s/ (floor %d)", file, pkg, from, fl, to, tf))
		}
		if to == "refproxy" && from != "refproxy" && pkg != "refproxy" {
			if _, listed := debts[a]; !listed {
				out = append(out, fmt.Sprintf("%s imports %s: outside refproxy/, import package refproxy to embed the proxy; a contract the proxy shares belongs under golden/", file, pkg))
				continue
			}
			debts[a] = true
		}
	}
	for _, d := range allowed {
		if !debts[d] {
			out = append(out, fmt.Sprintf("refproxyDebts lists %q, which no longer holds: take it off the list", d))
		}
	}
	return out
}

// TestArrowsPointDown: the arrows between top-level folders all point
// down (floors), and outside refproxy/ a refproxy package is imported
// only to embed the proxy, or as one of the debts listed.
func TestArrowsPointDown(t *testing.T) {
	all := imports(t, "..")
	if len(all) < 100 {
		t.Fatalf("read %d imports of project packages; the walk missed the tree", len(all))
	}
	for _, v := range violations(all, refproxyDebts) {
		t.Error(v)
	}
}

// TestArrowsCatchUpwardImports: each rule fails on an import planted to
// break it, and on nothing else.
func TestArrowsCatchUpwardImports(t *testing.T) {
	fine := []string{
		"cli/internal/tracecmd/trace.go -> golden/trace/watch",
		"steps/targets/cluster/cluster.go -> clusters/kube",
		"steps/targets/inprocess/inprocess.go -> refproxy",
		"refproxy/internal/tracing/sse.go -> golden/trace/watch",
	}
	for _, c := range []struct{ planted, want string }{
		{"golden/trace/sse/limits.go -> refproxy/config", "golden/ (floor 1) may import only the floors below it, not refproxy/ (floor 2)"},
		{"clusters/kube/binaries.go -> steps/toolbin", "clusters/ (floor 3) may import only the floors below it, not steps/ (floor 4)"},
		{"refproxy/internal/proxy/serve.go -> cli/admin", "not cli/ (floor 5)"},
		{"features/spec.go -> golden", "features/ (floor 1) may import only the floors below it, not golden/ (floor 1)"},
		{"cli/internal/tracecmd/trace.go -> refproxy/internal/tracing", "outside refproxy/, import package refproxy to embed the proxy"},
		{"tools/x.go -> golden", "folder tools/ has no floor"},
	} {
		got := violations(append(slices.Clone(fine), c.planted), nil)
		file, _, _ := strings.Cut(c.planted, " -> ")
		said := false
		for _, v := range got {
			said = said || strings.Contains(v, c.want)
			if !strings.HasPrefix(v, file) {
				t.Errorf("%s: a violation of another file: %s", c.planted, v)
			}
		}
		if !said {
			t.Errorf("%s: got %q, want a violation saying %q", c.planted, got, c.want)
		}
	}
	if got := violations(fine, []string{"cli/internal/whatif/whatif.go -> golden/routing"}); len(got) != 1 || !strings.Contains(got[0], "no longer holds") {
		t.Errorf("a debt paid off but still listed: got %q", got)
	}
}

// maxFunc bounds a function of non-test, non-generated code; maxRegister
// bounds a register function of the suite's steps (one line a step).
const (
	maxFunc     = 150
	maxRegister = 60
)

// TestFunctionsFitOnAScreenOrTwo: no function of the project's own code
// is longer than maxFunc lines, and no step register function longer than
// maxRegister.
func TestFunctionsFitOnAScreenOrTwo(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
	for _, rel := range sourceFiles(t, "..") {
		if strings.HasPrefix(filepath.Base(rel), "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("..", rel), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			n++
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			limit := maxFunc
			if strings.HasPrefix(fn.Name.Name, "register") && strings.HasSuffix(fn.Name.Name, "Steps") {
				limit = maxRegister
			}
			if lines > limit {
				t.Errorf("%s: %s is %d lines, over %d: split it where its steps are", rel, fn.Name.Name, lines, limit)
			}
		}
	}
	if n < 1000 {
		t.Fatalf("read %d functions; the walk missed the tree", n)
	}
}

// TestArchitectureNamesRealFiles: every file or folder ARCHITECTURE.md
// names in backquotes (`refproxy/internal/tracing/capture.go`, `steps/targets`)
// exists, so the map stays true when the house is rearranged.
func TestArchitectureNamesRealFiles(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:golden|features|refproxy|steps|cli|clusters|docs)/[A-Za-z0-9_./-]*[A-Za-z0-9_])[`:]")
	seen := map[string]bool{}
	for _, m := range named.FindAllStringSubmatch(string(doc), -1) {
		p := m[1]
		if i := strings.LastIndexByte(p, '.'); i > 0 && i+1 < len(p) && p[i+1] >= 'A' && p[i+1] <= 'Z' {
			p = p[:i] // a package's name: `cli/internal/connect.Cluster`
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("ARCHITECTURE.md names %s, which does not exist", p)
		}
	}
	if len(seen) < 50 {
		t.Fatalf("found %d paths in ARCHITECTURE.md; the pattern missed them", len(seen))
	}
}
