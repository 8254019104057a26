package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"
)

// obeyed returns the first character of out a terminal would obey rather
// than show (golden/termtext): a C0 control but tab, line feed and the CR
// of a CRLF, DEL, a C1 control or a bidirectional control; "" when none.
func obeyed(out string) string {
	for i, r := range out {
		crlf := r == '\r' && strings.HasPrefix(out[i:], "\r\n")
		if r < 0x20 && r != '\t' && r != '\n' && !crlf || r >= 0x7f && r <= 0x9f || unicode.Is(unicode.Bidi_Control, r) {
			start := max(0, i-40)
			return fmt.Sprintf("%U at byte %d, after %q", r, i, out[start:i])
		}
	}
	return ""
}

// shownNotObeyed fails the test when gwdiag's output holds a character a
// terminal would obey.
func shownNotObeyed(t *testing.T, what string, r result) {
	t.Helper()
	for _, o := range []struct{ name, out string }{{"stdout", r.stdout}, {"stderr", r.stderr}} {
		if c := obeyed(o.out); c != "" {
			t.Errorf("%s writes to %s a control character a terminal obeys: %s", what, o.name, c)
		}
	}
}

// plantedRaw are what the terminal-escapes case plants (hostileproxy),
// as its strings hold them; plantedShown as gwdiag shows them.
var (
	plantedRaw   = []string{"\x1b]52;c;cm0gLXJmIH4=\a", "\u202e"}
	plantedShown = `\u001b`
)

// TestShownNeverObeyed: whatever control sequences a proxy's trace and
// dump hold (the hostile proxy's terminal-escapes case: OSC 52 to set the
// clipboard, line erases, a C1 CSI, a right-to-left override, a lone CR,
// planted in a request's path and user-agent, a route's and a backend's
// name, a reason and an event type), no gwdiag command writes one to the
// terminal: text shows them escaped, JSON and YAML keep them as their own
// escapes, so that what is read back is what the proxy sent.
func TestShownNeverObeyed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a process")
	}
	bin, err := hostileBin()
	if err != nil {
		t.Fatal(err)
	}
	admin := startHostile(t, bin, "terminal-escapes")
	const trace, dump = "hostileproxy/terminal-escapes.jsonl", "hostileproxy/terminal-escapes-dump.json"
	for _, c := range []struct {
		args   []string
		format string // text, jsonl, json or yaml
	}{
		{[]string{"trace", "--local", "--raw", "--admin-url", admin}, "jsonl"},
		{[]string{"trace", "--raw", "-f", trace}, "jsonl"},
		{[]string{"trace", "explain", "--local", "--details", "--admin-url", admin}, "text"},
		{[]string{"trace", "explain", "--details", "-f", trace}, "text"},
		{[]string{"trace", "explain", "-o", "json", "--details", "-f", trace}, "json"},
		{[]string{"config", "all", "--local", "--admin-url", admin}, "text"},
		{[]string{"config", "all", "-f", dump}, "text"},
		{[]string{"config", "all", "-o", "json", "-f", dump}, "json"},
		{[]string{"config", "all", "-o", "yaml", "-f", dump}, "yaml"},
		{[]string{"config", "explain", "-f", dump, "--", "http://gw.local/x"}, "text"},
	} {
		what := "gwdiag " + strings.Join(c.args, " ")
		r := gwdiag(t, nil, nil, c.args...)
		if r.code != 0 {
			t.Errorf("%s: exit %d, want 0:\n%s", what, r.code, r.stderr)
			continue
		}
		shownNotObeyed(t, what, r)
		switch c.format {
		case "text":
			if !strings.Contains(r.stdout, plantedShown) {
				t.Errorf("%s does not show %s:\n%s", what, plantedShown, r.stdout)
			}
		case "jsonl", "json", "yaml":
			var strs []string
			sc := bufio.NewScanner(strings.NewReader(r.stdout))
			sc.Buffer(nil, 1<<20)
			docs := []string{r.stdout}
			if c.format == "jsonl" {
				docs = nil
				for sc.Scan() {
					docs = append(docs, sc.Text())
				}
			}
			for _, d := range docs {
				var v any
				unmarshal := json.Unmarshal
				if c.format == "yaml" {
					unmarshal = func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
				}
				if err := unmarshal([]byte(d), &v); err != nil {
					t.Fatalf("%s wrote what is not %s: %v\n%s", what, c.format, err, d)
				}
				strs = append(strs, stringsOf(v)...)
			}
			all := strings.Join(strs, "\n")
			for _, p := range plantedRaw {
				if !strings.Contains(all, p) {
					t.Errorf("%s: read back, its strings lack %q, which the proxy sent", what, p)
				}
			}
		}
	}
}

// stringsOf returns every string of a decoded JSON or YAML value, the
// keys of its objects too.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, stringsOf(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(append(out, k), stringsOf(e)...)
		}
		return out
	}
	return nil
}
