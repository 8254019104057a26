package logfilter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "info", want: "info"},
		{in: "WARN", want: "warn"},
		{in: "warn,refproxy::trace=debug", want: "warn,refproxy::trace=debug"},
		{in: "refproxy::proxy=off, info", want: "info,refproxy::proxy=off"},
		{in: "refproxy", want: "error,refproxy=trace"},
		{in: "", wantErr: "empty log filter"},
		{in: " , ", wantErr: "empty log filter"},
		{in: "refproxy::trace::sse", want: "error,refproxy::trace::sse=trace"},
		// A word that is neither a level nor a module refproxy logs under
		// is a typo, not a module to enable.
		{in: "garbage", wantErr: `"garbage" is neither a level (off, error, warn, info, debug, trace) nor a module of refproxy (refproxy, refproxy::...)`},
		{in: "info,garbage=debug", wantErr: `"garbage" is not a module of refproxy (refproxy, refproxy::...)`},
		{in: "refproxyx=debug", wantErr: `"refproxyx" is not a module of refproxy (refproxy, refproxy::...)`},
		{in: "refproxy=loud", wantErr: `invalid level "loud" for module "refproxy" (want off, error, warn, info, debug or trace)`},
		{in: "a=b=c", wantErr: `invalid directive "a=b=c": more than one '='`},
		{in: "=info", wantErr: "empty module name"},
		{in: "info,debug", wantErr: `default level set twice ("debug")`},
		{in: "info/foo", wantErr: "message filters (/regex) are not supported"},
		{in: "a b=info", wantErr: `invalid module name "a b"`},
		{in: strings.Repeat("x", 100<<10), wantErr: "log filter too long: 102400 bytes, at most 1024"},
		{in: "info," + strings.Repeat("y", 500) + "=info", wantErr: `"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"... is not a module of refproxy (refproxy, refproxy::...)`},
	}
	for _, tt := range tests {
		name := tt.in
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			f, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parse(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) error = %v", tt.in, err)
			}
			if tt.want != "" && f.String() != tt.want {
				t.Errorf("Parse(%q).String() = %q, want %q", tt.in, f.String(), tt.want)
			}
		})
	}
}

func TestHandlerLevels(t *testing.T) {
	f, err := Parse("warn,refproxy::trace=debug,refproxy::trace::sse=off")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	c := NewControl(f)
	log := slog.New(c.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: LevelTrace})))
	tests := []struct {
		module string
		level  slog.Level
		logged bool
	}{
		{"refproxy::proxy", slog.LevelInfo, false},
		{"refproxy::proxy", slog.LevelWarn, true},
		{"refproxy::trace", slog.LevelDebug, true},
		{"refproxy::trace", LevelTrace, false},
		{"refproxy::tracer", slog.LevelDebug, false}, // not a child of refproxy::trace
		{"refproxy::trace::sse", slog.LevelError, false},
	}
	for _, tt := range tests {
		buf.Reset()
		log.With(ModuleKey, tt.module).Log(t.Context(), tt.level, "hello")
		if got := strings.Contains(buf.String(), "hello"); got != tt.logged {
			t.Errorf("module %s level %s: logged = %v, want %v", tt.module, tt.level, got, tt.logged)
		}
	}
	// Changing the filter applies to loggers made before the change.
	l := log.With(ModuleKey, "refproxy::proxy")
	f2, _ := Parse("info")
	c.Set(f2)
	buf.Reset()
	l.Info("after")
	if !strings.Contains(buf.String(), "after") {
		t.Errorf("after Set(info), an info record of refproxy::proxy was not logged")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"info", "warn,refproxy::trace=debug", "a=b=c", "off", "x=trace,,y=off", "/re"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := Parse(s)
		if err != nil {
			return
		}
		// What parses must print as something that parses to the same filter.
		again, err := Parse(flt.String())
		if err != nil {
			t.Fatalf("Parse(%q) ok, but its String() %q does not parse: %v", s, flt.String(), err)
		}
		if again.String() != flt.String() {
			t.Fatalf("round trip: %q -> %q -> %q", s, flt.String(), again.String())
		}
	})
}
