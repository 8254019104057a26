package stepdefs

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
)

// Secrets are the credentials a run knows of: those its steps put in
// requests and configs (Plant), and those a proxy's traces showed in the
// credential headers (CollectEvent: a proxy that does not redact). Whatever
// the run writes is scrubbed of them: a step's error (so the report, JUnit,
// Cucumber JSON and the progress view), the proxy's logs kept for a failed
// scenario, the traces handed to OnTrace. Safe for concurrent use, and a
// nil *Secrets does nothing: tests of single steps need none.
type Secrets struct {
	r    *redact.Redactor
	run  string // the run's part of every planted credential
	next atomic.Int64

	mu sync.Mutex
	s  redact.Secrets
}

// PlantedPrefix starts every credential a run plants: a test searches the
// run's outputs for it (with the run's id, PlantPrefix).
const PlantedPrefix = "gwdiag-planted-"

// NewSecrets returns a run's Secrets, with a fingerprint key of its own.
func NewSecrets() *Secrets {
	var id [6]byte
	rand.Read(id[:])
	return &Secrets{r: redact.New(redact.Options{}), run: hex.EncodeToString(id[:])}
}

// PlantPrefix is what every credential this run plants starts with.
func (x *Secrets) PlantPrefix() string { return PlantedPrefix + x.run + "-" }

// Plant returns a new credential, unique to the run and to the call, and
// keeps it. what names it in the value, for whoever reads a leak.
func (x *Secrets) Plant(what string) string {
	v := x.PlantPrefix() + what + "-" + strconv.FormatInt(x.next.Add(1), 10)
	x.Add(v)
	return v
}

// Add keeps v.
func (x *Secrets) Add(v string) {
	if x == nil {
		return
	}
	x.mu.Lock()
	x.s.Add(v)
	x.mu.Unlock()
}

// AddHeaders keeps the credentials that h's credential headers carry.
func (x *Secrets) AddHeaders(h http.Header) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, vs := range h {
		if x.r.Sensitive(k) {
			for _, v := range vs {
				x.s.AddHeader(k, v)
			}
		}
	}
}

// CollectEvent keeps the credentials the credential headers of a trace
// event (its JSON) show.
func (x *Secrets) CollectEvent(ev []byte) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.r.CollectEvent(ev, &x.s)
}

// Scrub returns s with every credential the run knows replaced by its
// marker.
func (x *Secrets) Scrub(s string) string {
	if x == nil {
		return s
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	out, _ := x.r.Scrub(s, &x.s)
	return out
}

// ScrubEvent returns the JSON trace event ev with the values of its
// credential headers and every credential the run knows redacted.
func (x *Secrets) ScrubEvent(ev []byte) []byte {
	if x == nil {
		return ev
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	out, _ := x.r.AppendEvent(nil, ev, &x.s)
	return out
}

// scrubbedError is an error whose message was scrubbed of credentials; it
// unwraps to the original, so that errors.Is still sees what it wraps.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// ScrubError is err with its message scrubbed (nil stays nil).
func (x *Secrets) ScrubError(err error) error {
	if err == nil || x == nil {
		return err
	}
	if msg := x.Scrub(err.Error()); msg != err.Error() {
		return &scrubbedError{msg: msg, err: err}
	}
	return err
}
