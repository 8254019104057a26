package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// publicAPI are the packages whose exported names are kept although no
// other package of the module uses them, each for the readers outside the
// module it is written for. Outside them, a name is exported only where
// another package (or the package's own external tests) uses it, or where
// the declaration of such a name shows it (a type in a used function's
// signature, in an exported field or method of a used type).
var publicAPI = map[string]string{
	"steps":                 "the suite as a Go library: a run's options, its report and the extended features a proxy claims",
	"golden":                "the golden files' placeholders and alignment, read by anyone who compares traces",
	"golden/trace":          "the trace contract: what a trace is",
	"golden/trace/otlp":     "the trace contract over OpenTelemetry: span and attribute names a collector's user queries",
	"golden/trace/redact":   "what is redacted and the bounds of a capture, for readers of redacted traces",
	"golden/trace/watch":    "the follow protocol's bounds",
	"golden/trace/sse":      "the SSE reader's bounds and errors",
	"golden/trace/explain":  "the wording of a verdict",
	"golden/routing":        "what a route match is and why it did not match",
	"refproxy/config":       "the reference proxy's config schema, one type per object of the YAML",
	"clusters/api/v1alpha1": "the policy CRD's Go types and their enumerated values, as kubebuilder generates them",
	"clusters/kube/kubeenv": "sigs.k8s.io/e2e-framework set-up functions for tests written against gwdiag's clusters",
}

// enumerators are exported constants kept with the rest of their type's
// values, which other packages use: a switch over the type names them all.
var enumerators = []string{
	"refproxy/ratelimit/remote.Allowed",
}

// TestExportsAreUsed: a package-level name is exported only where another
// package uses it (publicAPI, enumerators). A new exported name nobody
// else uses fails with the name to unexport; an entry of publicAPI or
// enumerators that no longer holds fails too, so the lists only shrink.
func TestExportsAreUsed(t *testing.T) {
	got := unusedExports(t, "..")
	for _, v := range exportViolations(got, publicAPI, enumerators) {
		t.Error(v)
	}
}

// TestExportsCatchAnUnusedName: the check finds a name exported and used
// only in its own package, and takes a use from another package, from the
// package's external tests and through a used signature.
func TestExportsCatchAnUnusedName(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module github.com/gwdiag/gwdiag\n")
	write("golden/a/a.go", `package a
type Result struct{ Kind Kind }
type Kind int
type Alone int
type Hidden int
func Run() Result { return Result{} }
func Helper() Hidden { return 0 }
var ForTests = 1
var _ = Helper
`)
	write("golden/a/a_test.go", "package a_test\nimport \"github.com/gwdiag/gwdiag/golden/a\"\nvar _ = a.ForTests\n")
	write("refproxy/b/b.go", "package b\nimport x \"github.com/gwdiag/gwdiag/golden/a\"\nvar _ = x.Run\n")
	got := unusedExports(t, root)
	want := []string{"golden/a.Alone", "golden/a.Helper", "golden/a.Hidden"}
	if !slices.Equal(got, want) {
		t.Fatalf("unused exports: got %v, want %v", got, want)
	}
	v := exportViolations(got, map[string]string{"refproxy/b": "gone"}, []string{"golden/a.Alone"})
	wantV := []string{
		"golden/a.Helper is exported, but no other package uses it: unexport it, or list its package in publicAPI with why",
		"golden/a.Hidden is exported, but no other package uses it: unexport it, or list its package in publicAPI with why",
		`publicAPI lists refproxy/b, which exports nothing unused: take it off the list`,
	}
	if !slices.Equal(v, wantV) {
		t.Fatalf("violations:\n got %q\nwant %q", v, wantV)
	}
}

// exportViolations says what breaks the rule among unused ("pkg.Name"),
// given the packages and names allowed.
func exportViolations(unused []string, api map[string]string, enums []string) []string {
	var out []string
	needed := map[string]bool{}
	for _, u := range unused {
		pkg, _, _ := strings.Cut(u, ".")
		if _, ok := api[pkg]; ok {
			needed[pkg] = true
			continue
		}
		if slices.Contains(enums, u) {
			needed[u] = true
			continue
		}
		out = append(out, u+" is exported, but no other package uses it: unexport it, or list its package in publicAPI with why")
	}
	for _, pkg := range slices.Sorted(maps.Keys(api)) {
		if !needed[pkg] {
			out = append(out, fmt.Sprintf("publicAPI lists %s, which exports nothing unused: take it off the list", pkg))
		}
	}
	for _, e := range enums {
		if !needed[e] {
			out = append(out, fmt.Sprintf("enumerators lists %s, which is no longer exported and unused: take it off the list", e))
		}
	}
	return out
}

// goPackage is what unusedExports keeps of one package: its package-level
// declarations by name, and its methods by receiver type.
type goPackage struct {
	name    string              // the package clause
	decls   map[string]ast.Node // exported package-level names
	methods map[string][]*ast.FuncDecl
}

// unusedExports returns "pkg.Name" (pkg relative to the module) for each
// exported package-level name of a non-main package under root that no
// other package uses, sorted. A use is a selector pkg.Name in any Go file
// of another package or of the package's external tests (package x_test),
// or a mention in the declaration of a used name of the same package.
func unusedExports(t *testing.T, root string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string]*goPackage{}
	type file struct {
		dir string
		f   *ast.File
	}
	var files []file
	for _, rel := range goFiles(t, root) {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		dir := path.Dir(rel)
		files = append(files, file{dir, f})
		if strings.HasSuffix(rel, "_test.go") || f.Name.Name == "main" {
			continue
		}
		p := pkgs[dir]
		if p == nil {
			p = &goPackage{name: f.Name.Name, decls: map[string]ast.Node{}, methods: map[string][]*ast.FuncDecl{}}
			pkgs[dir] = p
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					if d.Name.IsExported() {
						p.decls[d.Name.Name] = d.Type
					}
				} else if d.Name.IsExported() {
					if r := recvName(d.Recv.List[0].Type); r != "" {
						p.methods[r] = append(p.methods[r], d)
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							p.decls[s.Name.Name] = s.Type
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								p.decls[n.Name] = s // its type, or its value's
							}
						}
					}
				}
			}
		}
	}
	used := map[string]bool{} // dir + "." + name
	for _, fl := range files {
		names := map[string]string{} // import name → dir
		for _, im := range fl.f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			dir, ok := strings.CutPrefix(ip, module)
			if !ok || pkgs[dir] == nil {
				continue
			}
			n := pkgs[dir].name
			if im.Name != nil {
				n = im.Name.Name
			}
			names[n] = dir
		}
		// The package's external tests (package x_test) import it as
		// another package would, and their uses count.
		xtest := strings.HasSuffix(fl.f.Name.Name, "_test")
		ast.Inspect(fl.f, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok {
					if dir, ok := names[x.Name]; ok && (dir != fl.dir || xtest) {
						used[dir+"."+s.Sel.Name] = true
					}
				}
			}
			return true
		})
	}
	// What a used name's declaration mentions is used too.
	var work []string
	for k := range used {
		work = append(work, k)
	}
	for len(work) > 0 {
		k := work[len(work)-1]
		work = work[:len(work)-1]
		dir, name, _ := strings.Cut(k, ".")
		p := pkgs[dir]
		if p == nil {
			continue
		}
		var mark func(n ast.Node)
		mark = func(n ast.Node) {
			if n == nil {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					return false // another package's name
				case *ast.StructType:
					// an unexported field's type is not shown
					for _, fd := range n.Fields.List {
						if len(fd.Names) == 0 || slices.ContainsFunc(fd.Names, (*ast.Ident).IsExported) {
							mark(fd.Type)
						}
					}
					return false
				case *ast.Ident:
					if _, ok := p.decls[n.Name]; ok && !used[dir+"."+n.Name] {
						used[dir+"."+n.Name] = true
						work = append(work, dir+"."+n.Name)
					}
				}
				return true
			})
		}
		mark(p.decls[name])
		for _, m := range p.methods[name] {
			mark(m.Type)
		}
	}
	var out []string
	for dir, p := range pkgs {
		for name := range p.decls {
			if !used[dir+"."+name] {
				out = append(out, dir+"."+name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// recvName is the type name of a method's receiver (T, *T, T[P]).
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
