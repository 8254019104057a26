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

// Colours of the pages' CSS (style.html.tmpl) a screenshot must show.
var (
	passedCell      = color.RGBA{0xda, 0xfb, 0xe1, 0xff}
	failedCell      = color.RGBA{0xff, 0xeb, 0xe9, 0xff}
	unsupportedCell = color.RGBA{0xff, 0xf8, 0xc5, 0xff}
	failedBadge     = color.RGBA{0xcf, 0x22, 0x2e, 0xff}
	passedBadge     = color.RGBA{0x1a, 0x7f, 0x37, 0xff}
)

// TestHTMLInBrowser renders the page in a real headless browser (Debian's
// chromium; make test installs it): the DOM it builds has the matrix and
// the failures, and its screenshot shows the result colours, so the page's
// CSS applies. GWDIAG_SCREENSHOT_DIR keeps the screenshot.
func TestHTMLInBrowser(t *testing.T) {
	r, err := Read("testdata/report.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	dom, img := inBrowser(t, b.Bytes(), "conformance-report.png")
	for _, want := range []string{`<table id="matrix">`, "Burst adds to the base limit and refused requests are not forwarded", "<dt>Wanted</dt>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the browser's DOM lacks %q", want)
		}
	}
	// The cells of a passed and a failed feature, and the FAILED badge.
	colours(t, img, map[string]color.RGBA{"passed cell": passedCell, "failed cell": failedCell, "failed badge": failedBadge})
}

// TestMatrixInBrowser: the page of two reports side by side, of different
// feature sets, in the browser: its DOM has the table with a cell per
// report on each row and the note under it, and its screenshot the
// colours of passed, failed and unsupported cells and both verdicts.
func TestMatrixInBrowser(t *testing.T) {
	rs := reports(t, "report.yaml", "other-report.yaml")
	rs[1].Producer.FeatureSet = "v0.3.0"
	var b bytes.Buffer
	if err := MatrixHTML(&b, rs); err != nil {
		t.Fatal(err)
	}
	dom, img := inBrowser(t, b.Bytes(), "conformance-matrix.png")
	for _, want := range []string{`<table id="side-by-side">`, `<th class="profile" colspan="3">cluster profile</th>`,
		`<tr><td>trace-order</td><td class="empty">—</td><td class="passed">passed <small>3/3</small></td></tr>`,
		`<td class="failed">failed <small>0/1</small> <small>· claimed</small></td>`,
		`<p class="note">Not comparable: these reports ran different feature sets`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the browser's DOM lacks %q", want)
		}
	}
	colours(t, img, map[string]color.RGBA{"passed cell": passedCell, "failed cell": failedCell, "unsupported cell": unsupportedCell,
		"failed badge": failedBadge, "passed badge": passedBadge})
}

// inBrowser loads page in headless chromium and returns the DOM it built
// and its screenshot, which GWDIAG_SCREENSHOT_DIR keeps as name. It skips
// the test where chromium is not installed.
func inBrowser(t *testing.T, html []byte, name string) (string, image.Image) {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install chromium; make test installs it): the HTML page is not checked in a browser")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, html, 0o644); err != nil {
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
	shot := filepath.Join(dir, "report.png")
	if out, err := exec.CommandContext(ctx, browser, append(args, "--screenshot="+shot, "file://"+page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if keep := os.Getenv("GWDIAG_SCREENSHOT_DIR"); keep != "" {
		if err := os.WriteFile(filepath.Join(keep, name), b, 0o644); err != nil {
			t.Error(err)
		}
	}
	return string(dom), img
}

// colours checks that the screenshot shows each colour over a cell's
// worth of pixels.
func colours(t *testing.T, img image.Image, want map[string]color.RGBA) {
	t.Helper()
	for name, c := range want {
		if n := count(img, c); n < 200 {
			t.Errorf("screenshot: %d pixels of the %s colour %v, want a cell's worth", n, name, c)
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
