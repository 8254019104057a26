package llm

import (
	"mime"
	"strings"
	"testing"
)

// TestIsJSONAgreesWithMime: isJSON's fast path for the usual values answers
// exactly what mime.ParseMediaType does.
func TestIsJSONAgreesWithMime(t *testing.T) {
	ref := func(ct string) bool {
		mt, _, err := mime.ParseMediaType(ct)
		return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
	}
	for _, ct := range []string{
		"application/json", "Application/JSON", " application/json ", "application/json; charset=utf-8",
		"application/json;charset=UTF-8", "application/json;", "application/json; charset", "application/json; charset=utf-8; x",
		"application/problem+json", "text/event-stream", "application/jsonx", "application/json/x", "", "application/json, text/plain",
	} {
		if got, want := isJSON(ct), ref(ct); got != want {
			t.Errorf("isJSON(%q) = %v, want %v (mime.ParseMediaType)", ct, got, want)
		}
	}
}
