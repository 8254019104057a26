package toolbin

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildStatic: one package, built as every static program of the
// module is (CGO_ENABLED=0, -trimpath: the build records both), comes
// out statically linked, and the same source at two paths gives the
// same bytes (what lets one compile serve every checkout). A package
// that does not build is an error naming the command and the compiler's
// complaint.
func TestBuildStatic(t *testing.T) {
	src := func() string {
		dir := t.TempDir()
		for name, body := range map[string]string{
			"go.mod":  "module example.com/hello\n\ngo 1.26\n",
			"main.go": "package main\n\nimport \"net\"\n\nfunc main() { println(net.IPv4len) }\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	out := t.TempDir()
	a, b := filepath.Join(out, "a"), filepath.Join(out, "b")
	for bin, dir := range map[string]string{a: src(), b: src()} {
		if err := BuildStatic(context.Background(), dir, bin, "."); err != nil {
			t.Fatal(err)
		}
	}
	info, err := buildinfo.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v, want CGO_ENABLED=0 and -trimpath=true", settings)
	}
	f, err := elf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: dynamically linked", a, p.Type)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if string(ab) != string(bb) {
		t.Errorf("the same source at two paths gave different binaries (%d and %d bytes)", len(ab), len(bb))
	}

	broken := src()
	if err := os.WriteFile(filepath.Join(broken, "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = BuildStatic(context.Background(), broken, filepath.Join(out, "c"), ".")
	if err == nil || !strings.Contains(err.Error(), "go build -trimpath") || !strings.Contains(err.Error(), "undefined") {
		t.Errorf("broken package: %v, want the command and the compiler's error", err)
	}
}

// TestMakefileStaticFlags: the Makefile's static configuration (make
// build, vet, the fault catalogue) is StaticEnv and StaticFlags, so that
// what make compiles and what the tests build share Go's build cache; a
// flag added on one side only would compile the module's graph twice.
func TestMakefileStaticFlags(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, value, ok := strings.Cut(line, ":="); ok && strings.HasPrefix(name, "STATIC_") {
			vars[strings.TrimSpace(name)] = strings.Join(strings.Fields(value), " ")
		}
	}
	if got := vars["STATIC_ENV"]; got != StaticEnv {
		t.Errorf("Makefile STATIC_ENV = %q, want toolbin.StaticEnv %q", got, StaticEnv)
	}
	if got, want := vars["STATIC_FLAGS"], strings.Join(StaticFlags, " "); got != want {
		t.Errorf("Makefile STATIC_FLAGS = %q, want toolbin.StaticFlags %q", got, want)
	}
}
