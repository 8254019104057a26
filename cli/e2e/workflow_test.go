package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/steps/targets/container/containertest"
)

// workflow is the part of a GitHub Actions workflow the test reads.
type workflow struct {
	Env  map[string]string `json:"env"`
	Jobs map[string]struct {
		Steps []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
			If   string `json:"if"`
			Run  string `json:"run"`
			Uses string `json:"uses"`
		} `json:"steps"`
	} `json:"jobs"`
}

// TestWorkflowCommands runs the run: steps of docs/gwdiag-conformance.yml,
// as a vendor's CI would, with the reference proxy as the vendor's proxy,
// on the local Docker daemon: build the image FROM scratch, run the
// container target, write the report directory, the Markdown summary to
// $GITHUB_STEP_SUMMARY and the HTML page. Not run: the uses: steps
// (GitHub's actions) and the install steps: gwdiag's fetches a release
// through the module proxy (the gwdiag under test stands in on PATH), and
// redis-server's is make test's own (make redis-server).
// The run is narrowed to the admin feature (CONFORMANCE_ARGS) to keep it
// to seconds.
func TestWorkflowCommands(t *testing.T) {
	t.Parallel()
	containertest.Images(t) // skips without a Docker daemon
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs/gwdiag-conformance.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	job, ok := wf.Jobs["conformance"]
	if !ok {
		t.Fatal("the workflow has no job conformance")
	}
	work := t.TempDir()
	bin := t.TempDir()
	if err := os.Symlink(gwdiagBin, filepath.Join(bin, "gwdiag")); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(work, "step-summary.md")
	env := os.Environ()
	for k, v := range wf.Env {
		env = append(env, k+"="+v)
	}
	env = append(env, "PROXY_SRC="+root, "PROXY_PKG=./refproxy/cmd/refproxy", "PROXY_BIN=refproxy", "PROXY_DOCKERFILE=refproxy/Dockerfile",
		"IMAGE=gwdiag/workflow-test:"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		"CONFORMANCE_ARGS=--tags @admin --implementation refproxy --supported-features admin-error-status",
		"GITHUB_STEP_SUMMARY="+summary, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ran := 0
	for _, s := range job.Steps {
		if s.Run == "" || s.ID == "install-gwdiag" || s.ID == "install-redis" {
			continue
		}
		ran++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-eo", "pipefail", "-c", s.Run)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("step %s (%s): %v\n%s", s.ID, s.Name, err, out)
		}
		t.Logf("step %s:\n%s", s.ID, out)
	}
	if ran != 3 {
		t.Errorf("ran %d run: steps, want 3 (image, conformance, summary)", ran)
	}
	t.Cleanup(func() { exec.Command("docker", "image", "rm", "-f", envValue(env, "IMAGE")).Run() })
	out := filepath.Join(work, wf.Env["OUT"])
	for _, f := range []string{"extended-unversioned-container-report.yaml", "README.md", "junit.xml", "report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## gwdiag conformance: refproxy on the container target: PASSED") {
		t.Errorf("step summary:\n%s", md)
	}
	readme, _ := os.ReadFile(filepath.Join(out, "README.md"))
	if !strings.Contains(string(readme), "gwdiag conformance run --") || !strings.Contains(string(readme), "--image "+envValue(env, "IMAGE")) || !strings.Contains(string(readme), "--bundle-dir conformance-results/bundles") {
		t.Errorf("README's command:\n%s", readme)
	}
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
