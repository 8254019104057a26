// Package logfilter implements the log-filter syntax of Rust's env_logger
// (`info`, `warn,refproxy::trace=debug`, `refproxy::proxy=off`) over log/slog:
// a default level plus per-module levels, where a module is the logger's
// "module" attribute and directives apply to it and its `::` children.
package logfilter

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
)

// LevelTrace is below slog's debug, as env_logger's trace is below debug.
const LevelTrace = slog.LevelDebug - 4

// levelOff is above every level that is ever logged.
const levelOff = slog.Level(1 << 20)

var levels = map[string]slog.Level{
	"off": levelOff, "error": slog.LevelError, "warn": slog.LevelWarn,
	"info": slog.LevelInfo, "debug": slog.LevelDebug, "trace": LevelTrace,
}

// Directive sets the level of one module (and its children); Module is ""
// for the default.
type Directive struct {
	Module string
	Level  string
}

// Filter is a parsed filter.
type Filter struct {
	// Default applies to modules no directive names.
	Default string
	// Directives in the order given; for a module the longest match wins.
	Directives []Directive
}

// maxLen bounds a filter: a real one is a few directives long.
const maxLen = 1024

// rootTarget is the module every refproxy logger lives under.
const rootTarget = "refproxy"

// Parse reads a filter. An empty filter, unknown levels and modules that
// refproxy does not log under are errors: env_logger would take a typo such
// as "garbage" as a module to enable and silently lower everything else to
// error.
func Parse(s string) (Filter, error) {
	f := Filter{Default: "error"}
	s = strings.TrimSpace(s)
	if s == "" {
		return f, fmt.Errorf("empty log filter")
	}
	if len(s) > maxLen {
		return f, fmt.Errorf("log filter too long: %d bytes, at most %d", len(s), maxLen)
	}
	// env_logger allows a trailing /regex on the message; refproxy does not
	// filter messages, so say so rather than silently ignore it.
	if strings.Contains(s, "/") {
		return f, fmt.Errorf("message filters (/regex) are not supported")
	}
	sawDefault := false
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mod, lvl, hasEq := strings.Cut(part, "=")
		mod, lvl = strings.TrimSpace(mod), strings.ToLower(strings.TrimSpace(lvl))
		switch {
		case !hasEq:
			if _, ok := levels[strings.ToLower(mod)]; ok {
				if sawDefault {
					return f, fmt.Errorf("default level set twice (%q)", part)
				}
				sawDefault = true
				f.Default = strings.ToLower(mod)
				continue
			}
			// A bare module name enables everything for it.
			if err := checkModule(mod); err != nil {
				return f, err
			}
			if !ours(mod) {
				return f, fmt.Errorf("%s is neither a level (off, error, warn, info, debug, trace) nor a module of refproxy (%s, %s::...)", quote(mod), rootTarget, rootTarget)
			}
			f.Directives = append(f.Directives, Directive{Module: mod, Level: "trace"})
		default:
			if strings.Contains(lvl, "=") {
				return f, fmt.Errorf("invalid directive %q: more than one '='", part)
			}
			if err := checkModule(mod); err != nil {
				return f, err
			}
			if !ours(mod) {
				return f, fmt.Errorf("%s is not a module of refproxy (%s, %s::...)", quote(mod), rootTarget, rootTarget)
			}
			if _, ok := levels[lvl]; !ok {
				return f, fmt.Errorf("invalid level %q for module %q (want off, error, warn, info, debug or trace)", lvl, mod)
			}
			f.Directives = append(f.Directives, Directive{Module: mod, Level: lvl})
		}
	}
	if !sawDefault && len(f.Directives) == 0 {
		return f, fmt.Errorf("empty log filter")
	}
	return f, nil
}

// ours reports whether m is refproxy's root module or one below it.
func ours(m string) bool { return m == rootTarget || strings.HasPrefix(m, rootTarget+"::") }

// quote quotes s for an error, cut to 64 bytes: errors are echoed to clients.
func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}

func checkModule(m string) error {
	if m == "" {
		return fmt.Errorf("empty module name")
	}
	for _, r := range m {
		if !(r == '_' || r == ':' || r == '-' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return fmt.Errorf("invalid module name %q", m)
		}
	}
	return nil
}

// String renders the filter in the same syntax, default level first.
func (f Filter) String() string {
	parts := []string{f.Default}
	for _, d := range f.Directives {
		parts = append(parts, d.Module+"="+d.Level)
	}
	return strings.Join(parts, ",")
}

// LevelFor is the minimum level logged for a module.
func (f Filter) LevelFor(module string) slog.Level {
	best, bestLen := levels[f.Default], -1
	for _, d := range f.Directives {
		if (module == d.Module || strings.HasPrefix(module, d.Module+"::")) && len(d.Module) >= bestLen {
			best, bestLen = levels[d.Level], len(d.Module)
		}
	}
	return best
}

// ModuleKey is the slog attribute naming a logger's module.
const ModuleKey = "module"

// Control holds the current filter; every Handler made from it follows it.
type Control struct {
	cur atomic.Pointer[Filter]
}

// NewControl starts with filter f.
func NewControl(f Filter) *Control {
	c := &Control{}
	c.Set(f)
	return c
}

// Set replaces the filter.
func (c *Control) Set(f Filter) { c.cur.Store(&f) }

// Filter returns the current filter.
func (c *Control) Filter() Filter { return *c.cur.Load() }

// Handler wraps next so that records pass only at or above the level the
// current filter gives their module.
func (c *Control) Handler(next slog.Handler) slog.Handler {
	return &handler{c: c, next: next}
}

type handler struct {
	c      *Control
	next   slog.Handler
	module string
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.c.cur.Load().LevelFor(h.module) && h.next.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error { return h.next.Handle(ctx, r) }

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	for _, a := range as {
		if a.Key == ModuleKey {
			c.module = a.Value.String()
		}
	}
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}
