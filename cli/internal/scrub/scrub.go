// Package scrub is what gwdiag redacts in what it writes: the --redact
// and --redact-header flags of the trace commands, the one fingerprint
// key of the process, and the redaction of the events, captures and text
// (curl's output, the proxy's comments, errors) a command prints, shows
// or saves. A proxy that does not redact its traces (the real one today)
// shows its users' credentials; gwdiag keeps them from the terminal, the
// files and the clipboard it writes to (docs/redaction.md says why every
// output, the terminal included). It uses golden/trace/redact, as the
// reference proxy and the suite do, so a value one of them redacted is
// left as it is.
package scrub

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/gwdiag/gwdiag/cli/inject"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// KeyEnv names the environment variable that gives the fingerprint key:
// its bytes, as they are. Unset (or empty), each gwdiag process draws a
// random key, so that a fingerprint tells credentials apart within one
// output but cannot be compared across runs, nor a guess tested offline.
// Set, the fingerprints of the same credential are the same in every run
// with that key (to find one key in two captures).
const KeyEnv = "GWDIAG_REDACT_KEY"

// key is the process's fingerprint key: one for every command and
// stream of the process.
var key = sync.OnceValue(func() []byte { return keyFrom(os.Getenv) })

// keyFrom is the key KeyEnv gives in getenv's environment, else random.
func keyFrom(getenv func(string) string) []byte {
	if k := getenv(KeyEnv); k != "" {
		return []byte(k)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("scrub: no random key: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return k
}

// warning is what gwdiag prints on stderr, once, when it is told not to
// redact.
const warning = "warning: --redact=false: credentials (authorization, cookie, API-key headers, ...) are shown in clear"

// Flags are a command's redaction flags.
type Flags struct {
	// Redact redacts the default headers (redact.Defaults) and Headers;
	// without it only Headers are.
	Redact bool
	// Headers are more headers to redact (--redact-header, repeatable).
	Headers []string
	// Query are more query parameters to redact (--redact-query-param,
	// repeatable), beside redact.QueryDefaults.
	Query []string
}

// Add adds --redact and --redact-header to fs.
func (f *Flags) Add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.Redact, "redact", true, "redact credentials in what gwdiag prints and saves: the values of "+strings.Join(defaultNames(), ", ")+
		" and of --redact-header headers, of the query parameters "+strings.Join(defaultQuery(), ", ")+" and --redact-query-param in a URL,"+
		", the credentials a config or a route's policies hold (keys, passwords, secrets, tokens), and the same credentials wherever else they show,"+
		" each replaced by <redacted:fingerprint> (--redact=false: in clear; docs/redaction.md)")
	fs.StringArrayVar(&f.Headers, "redact-header", nil, "also redact the values of this header (repeatable; any case)")
	fs.StringArrayVar(&f.Query, "redact-query-param", nil, "also redact the values of this query parameter in a URL (repeatable; any case)")
}

// defaultNames are the headers redacted by default.
func defaultNames() []string {
	out := make([]string, len(redact.Defaults))
	for i, h := range redact.Defaults {
		out[i] = h.Name
	}
	return out
}

// defaultQuery are the query parameters redacted by default.
func defaultQuery() []string {
	out := make([]string, len(redact.QueryDefaults))
	for i, h := range redact.QueryDefaults {
		out[i] = h.Name
	}
	return out
}

// Check refuses a header name that is no HTTP token (RFC 9110 5.1), and a
// query parameter name that is not letters, digits, "-" and "_" (the
// names redact finds in a URL), at most 63 bytes.
func (f *Flags) Check() error {
	for _, h := range f.Headers {
		if h == "" || strings.IndexFunc(h, func(c rune) bool { return !isTokenChar(c) }) >= 0 {
			return fmt.Errorf("--redact-header %q: want a header name (letters, digits and !#$%%&'*+-.^_`|~)", h)
		}
	}
	for _, q := range f.Query {
		if q == "" || len(q) > 63 || strings.IndexFunc(q, func(c rune) bool { return !isQueryNameChar(c) }) >= 0 {
			return fmt.Errorf("--redact-query-param %q: want a query parameter name (letters, digits, - and _; at most 63)", q)
		}
	}
	return nil
}

func isQueryNameChar(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func isTokenChar(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)
}

// Scrubber returns the command's Scrubber; with --redact=false it warns
// on stderr (once) and redacts only --redact-header's headers, and nil
// (nothing redacted) when none were given.
func (f *Flags) Scrubber(stderr io.Writer) *Scrubber {
	if !f.Redact {
		if stderr != nil {
			fmt.Fprintln(stderr, warning)
		}
		if len(f.Headers) == 0 && len(f.Query) == 0 {
			return nil
		}
	}
	return newScrubber(redact.New(redact.Options{Key: key(), NoDefaults: !f.Redact, Extra: f.Headers, ExtraQuery: f.Query}))
}

// Default is the Scrubber of a command without flags: the default headers.
func Default() *Scrubber {
	return newScrubber(redact.New(redact.Options{Key: key()}))
}

// Scrubber redacts what one command writes. A nil Scrubber redacts
// nothing. It is safe for concurrent use; each stream or capture it
// redacts has its own Events.
type Scrubber struct {
	r *redact.Redactor
	// run are credentials of the whole run, scrubbed from every event and
	// text: those of the request gwdiag sends (inject mode). Set before
	// any Events is made.
	run redact.Secrets
}

// newScrubber returns a Scrubber redacting with r.
func newScrubber(r *redact.Redactor) *Scrubber { return &Scrubber{r: r} }

// Redactor is the Scrubber's Redactor (nil for a nil Scrubber).
func (s *Scrubber) Redactor() *redact.Redactor {
	if s == nil {
		return nil
	}
	return s.r
}

// AddHeader makes the credentials of a header the run sends (the
// injected request's) secrets of the whole run, when its name is one s
// redacts; the other headers are no secret.
func (s *Scrubber) AddHeader(name, value string) {
	if s != nil && s.r.Sensitive(name) {
		s.run.AddHeader(name, value)
	}
}

// AddSecret makes v a secret of the whole run (a password given to curl
// with -u, which no header shows as it is).
func (s *Scrubber) AddSecret(v string) {
	if s != nil {
		s.run.Add(v)
	}
}

// AddRequest makes the credentials a request of the run carries (one
// gwdiag sends, or evaluates) secrets of the run: those of its credential
// headers, and the passwords of -u, -U and the URL while the headers they
// go in are redacted.
func (s *Scrubber) AddRequest(r inject.Request) {
	if s == nil {
		return
	}
	headers, secrets := r.Credentials()
	for _, h := range headers {
		s.AddHeader(h.Name, h.Value)
	}
	if s.r.Sensitive("authorization") || s.r.Sensitive("proxy-authorization") {
		for _, v := range secrets {
			s.AddSecret(v)
		}
	}
}

// Config is the config dump b (JSON) with the credentials it holds
// redacted (redact.Redactor.AppendConfig): b itself when none is.
func (s *Scrubber) Config(b []byte) []byte {
	if s == nil {
		return b
	}
	out, changed := s.r.AppendConfig(nil, b)
	if !changed {
		return b
	}
	return out
}

// AddConfig makes the credentials the config dump b (JSON) holds secrets
// of the run, so that whatever quotes them is scrubbed of them.
func (s *Scrubber) AddConfig(b []byte) {
	if s != nil {
		s.r.CollectConfig(b, &s.run)
	}
}

// Text is text redacted (redact.Redactor.AppendText, with the run's
// secrets): a message, curl's output, a comment of the proxy.
func (s *Scrubber) Text(text string) string {
	if s == nil || text == "" {
		return text
	}
	run := s.runSecrets()
	return s.r.Text(text, &run)
}

func (s *Scrubber) runSecrets() redact.Secrets {
	var run redact.Secrets
	for _, v := range s.run.Values() {
		run.Add(v)
	}
	return run
}

// Error is err with its message redacted, asking for the same exit
// status (errors.As and errors.Is see err); err itself when nothing is.
func (s *Scrubber) Error(err error) error {
	if s == nil || err == nil {
		return err
	}
	msg := err.Error()
	if red := s.Text(msg); red != msg {
		return redactedError{msg: red, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// Events returns the redaction of one stream or capture: its events in
// order (redact.Stream), with the run's secrets. nil for a nil Scrubber.
func (s *Scrubber) Events() *Events {
	if s == nil {
		return nil
	}
	e := &Events{s: s, st: redact.NewStream(s.r), run: s.runSecrets()}
	return e
}

// Events redacts the events of one stream or capture, in order. A nil
// Events redacts nothing. Not for concurrent use.
type Events struct {
	s   *Scrubber
	st  *redact.Stream
	run redact.Secrets
	b   []byte
}

// Redacted counts the events that changed.
func (e *Events) Redacted() int {
	if e == nil {
		return 0
	}
	return e.st.Redacted
}

// Raw redacts raw, an event a reader parsed (h its header), and returns
// it: raw itself when nothing changed, else the redacted bytes, valid
// until the next call.
func (e *Events) Raw(raw []byte, h trace.Header) ([]byte, bool) {
	if e == nil {
		return raw, false
	}
	out, changed := e.st.Parsed(raw, h)
	if e.run.Len() > 0 {
		var more bool
		if e.b, more = e.s.r.AppendScrubbedJSON(e.b[:0], out, &e.run); more {
			return e.b, true
		}
	}
	return out, changed
}

// Captured redacts the event c in place: its Raw (a copy of its own when
// it changes) and its Event, decoded again.
func (e *Events) Captured(c *sse.Captured) {
	if e == nil {
		return
	}
	out, changed := e.Raw(c.Raw, trace.HeaderOf(c.Event))
	if !changed {
		return
	}
	c.Raw = append([]byte(nil), out...)
	if ev, err := trace.Parse(c.Raw); err == nil {
		c.Event = ev
	} else {
		// Redacting changes strings only: JSON in, JSON out. Never shown
		// the event in clear.
		c.Event = trace.Event{RequestID: c.Event.RequestID, Message: map[string]any{"type": string(c.Event.Type()), "redactionError": err.Error()}}
	}
}

// Trace redacts the events of t in place, in order.
func (e *Events) Trace(t *sse.CapturedTrace) {
	for i := range t.Events {
		e.Captured(&t.Events[i])
	}
}
