package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// secretConfig plants a provider API key (inline, and through the
// environment) in an llm config; extra is added at the end of the file,
// to break it.
func secretConfig(key, extra string) string {
	return `
llm:
  port: 0
  models:
  - name: inline
    provider: openAI
    params: {hostOverride: "127.0.0.1:8001", apiKey: "` + key + `"}
  - name: env
    provider: openAI
    params: {hostOverride: "127.0.0.1:8002", apiKey: "$GWDIAG_SECRET_TEST_KEY"}
` + extra
}

// TestSecretsNeverShown: a config's secrets (a Secret: a provider's API
// key, inline or from the environment) are read, and sent, as they are,
// but whatever shows the config shows "<redacted>": fmt in every verb,
// slog, JSON and YAML; and no error of a config that holds one quotes it,
// whatever is wrong, in its field or elsewhere.
func TestSecretsNeverShown(t *testing.T) {
	const inline, env = "sk-planted-inline-0001", "sk-planted-env-0002"
	t.Setenv("GWDIAG_SECRET_TEST_KEY", env)
	cfg, err := Parse("secret.yaml", []byte(secretConfig(inline, "")))
	if err != nil {
		t.Fatal(err)
	}
	var keys []Secret
	for _, r := range cfg.Binds[0].Listeners[0].Routes {
		for _, m := range r.LLM.Models {
			keys = append(keys, m.Backend.AI.APIKey)
		}
	}
	if len(keys) != 2 || string(keys[0]) != inline || string(keys[1]) != env {
		t.Fatalf("API keys %q, want %q and %q (the values, to send)", keys, inline, env)
	}
	var shown bytes.Buffer
	for _, v := range []any{cfg, *cfg, cfg.Binds, keys, keys[0]} {
		fmt.Fprintf(&shown, "%v %+v %#v %s %q %x\n", v, v, v, v, v, v)
		j, _ := json.Marshal(v)
		y, _ := yaml.Marshal(v)
		shown.Write(append(j, y...))
	}
	slog.New(slog.NewTextHandler(&shown, nil)).Info("config", "key", keys[0], "keys", keys)
	slog.New(slog.NewJSONHandler(&shown, nil)).Info("config", "key", keys[0])
	for _, s := range []string{inline, env} {
		if strings.Contains(shown.String(), s) {
			t.Errorf("the config shows the secret %q:\n%s", s, shown.String())
		}
	}
	if !strings.Contains(shown.String(), "<redacted>") {
		t.Errorf("want <redacted> where a secret is shown:\n%s", shown.String())
	}

	for _, tc := range []struct{ name, yaml string }{
		{"another field unknown", secretConfig(inline, "bogus: 1\n")},
		{"another field of the wrong type", secretConfig(inline, "binds: 3\n")},
		{"the key a list", strings.Replace(secretConfig("x", ""), `apiKey: "x"`, `apiKey: ["`+inline+`"]`, 1)},
		{"the key a mapping", strings.Replace(secretConfig("x", ""), `apiKey: "x"`, `apiKey: {file: "`+inline+`"}`, 1)},
		{"the key a mapping of another form", strings.Replace(secretConfig("x", ""), `apiKey: "x"`, `apiKey: {"`+inline+`": 1}`, 1)},
		{"the key beside an unknown param", strings.Replace(secretConfig(inline, ""), `apiKey:`, `bogus: 1, apiKey:`, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("secret.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error for\n%s", tc.yaml)
			}
			if strings.Contains(err.Error(), inline) {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
}
