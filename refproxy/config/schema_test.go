package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSchemaMatchesItsMetaschema makes, once, the check refproxy skips at
// each start (schemaURL): the embedded schema with refproxy's extensions
// is a valid schema of its draft. A schema that is not fails it, and
// compiles under schemaURL all the same (what the skip means).
func TestSchemaMatchesItsMetaschema(t *testing.T) {
	if _, err := compileSchema(checkedSchemaURL); err != nil {
		t.Fatalf("the config schema against its metaschema: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(SchemaJSON, &raw); err != nil {
		t.Fatal(err)
	}
	defs := raw["$defs"].(map[string]any)
	defs["LocalRoute"].(map[string]any)["type"] = 5 // not a type name
	if _, err := compileRaw(checkedSchemaURL, raw); err == nil || !strings.Contains(err.Error(), "LocalRoute") {
		t.Errorf("a schema whose LocalRoute has type 5, checked: got %v, want an error naming LocalRoute", err)
	}
	if _, err := compileRaw(schemaURL, raw); err != nil {
		t.Errorf("the same under schemaURL: %v, want it compiled without the check", err)
	}
}

// BenchmarkCompileSchema: what compiling the config schema costs each
// process that loads a config, refproxy at each start (schemaURL), and
// the same with the library's check against the metaschema (checked).
func BenchmarkCompileSchema(b *testing.B) {
	for _, bc := range []struct{ name, url string }{{"start", schemaURL}, {"checked", checkedSchemaURL}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := compileSchema(bc.url); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
