package steps

import (
	"strings"
	"testing"
)

// TestCheckTags: godog's tag syntax is accepted; Cucumber's newer syntax,
// which godog would read as one tag no scenario has (so the run would
// quietly run nothing), is refused naming the term and the syntax.
func TestCheckTags(t *testing.T) {
	for _, ok := range []string{"", "@admin", "~@extended", "@admin && ~@extended", "@request-limits,@token-overage", " @a , @b && ~@c "} {
		if err := checkTags(ok); err != nil {
			t.Errorf("checkTags(%q): %v, want accepted", ok, err)
		}
	}
	for expr, term := range map[string]string{
		"@a || @b":          `"@a || @b"`,
		"@a or @b":          `"@a or @b"`,
		"not @extended":     `"not @extended"`,
		"(@a,@b) && ~@c":    `"(@a"`,
		"@a && !@b":         `"!@b"`,
		"@a,":               `""`,
		"admin":             `"admin"`,
		"@a && ~@b && @c@d": `"@c@d"`,
	} {
		err := checkTags(expr)
		if err == nil || !strings.Contains(err.Error(), term+" is not a tag") || !strings.Contains(err.Error(), "comma (or)") {
			t.Errorf("checkTags(%q): %v, want the term %s named and the syntax", expr, err, term)
		}
	}
}
