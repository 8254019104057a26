package reportview

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTMLInBrowser renders the page in a real headless browser (Debian's
// chromium; make test installs it): the DOM it builds has the matrix and
// the failures, and its screenshot shows the result colours, so the page's
// CSS applies. GWDIAG_SCREENSHOT_DIR keeps the screenshot.
func TestHTMLInBrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install chromium; make test installs it): the HTML page is not checked in a browser")
	}
	r, err := Read("testdata/report.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// --no-sandbox: the tests may run as root, where chromium's sandbox
	// refuses to start; the page is ours and loads nothing.
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=" + filepath.Join(dir, "profile"),
		"--window-size=1100,1000"}
	dom, err := exec.CommandContext(ctx, browser, append(args, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, want := range []string{`<table id="matrix">`, "Burst adds to the base limit and refused requests are not forwarded", "<dt>Wanted</dt>"} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("the browser's DOM lacks %q", want)
		}
	}
	shot := filepath.Join(dir, "report.png")
	if out, err := exec.CommandContext(ctx, browser, append(args, "--screenshot="+shot, "file://"+page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The cells of a passed and a failed feature, and the FAILED badge.
	for name, c := range map[string]color.RGBA{"passed cell": {0xda, 0xfb, 0xe1, 0xff}, "failed cell": {0xff, 0xeb, 0xe9, 0xff}, "failed badge": {0xcf, 0x22, 0x2e, 0xff}} {
		if n := count(img, c); n < 200 {
			t.Errorf("screenshot: %d pixels of the %s colour %v, want a cell's worth", n, name, c)
		}
	}
	if keep := os.Getenv("GWDIAG_SCREENSHOT_DIR"); keep != "" {
		b, _ := os.ReadFile(shot)
		if err := os.WriteFile(filepath.Join(keep, "conformance-report.png"), b, 0o644); err != nil {
			t.Error(err)
		}
	}
}

func count(img image.Image, want color.RGBA) int {
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(b>>8) == want.B {
				n++
			}
		}
	}
	return n
}
