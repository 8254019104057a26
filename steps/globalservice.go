package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/ratelimitsvc"
	"github.com/gwdiag/gwdiag/steps/stepdefs"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// serviceConfig is the configuration of the services the suite runs: the
// domain alone, since every descriptor the suite sends carries its limit.
var serviceConfig = map[string]string{"gwdiag.yaml": "domain: " + targets.RateLimitDomain + "\ndescriptors: []\n"}

// rateLimitServices gives scenarios the global rate-limit service: the one
// the user named, or one the suite starts on first use and stops at the end
// of the run; and services of a scenario's own, which it may stop and start
// again without disturbing the others.
type rateLimitServices struct {
	external string
	log      io.Writer
	// progress receives the line saying the service is being built (an
	// installed gwdiag builds it into the user's cache, once).
	progress io.Writer
	// target says where the services listen (targets.ServiceHost).
	target targets.Target

	mu      sync.Mutex
	started bool
	shared  *ratelimitsvc.Service
	err     error

	// binMu makes the service binary's resolution (a build, the first
	// time) happen once however many scenarios start services at once.
	binMu   sync.Mutex
	binDone bool
	bin     string
	binErr  error
}

// binary is the service binary, resolved (or built) by the first caller;
// the others wait for it and share its answer.
func (r *rateLimitServices) binary(ctx context.Context) (string, error) {
	r.binMu.Lock()
	defer r.binMu.Unlock()
	if !r.binDone {
		r.bin, r.binErr = ratelimitsvc.ResolveBinary(ctx, r.log, r.progress)
		// A build the context cut short is tried again by the next caller.
		r.binDone = r.binErr == nil || ctx.Err() == nil
	}
	return r.bin, r.binErr
}

// start starts a service with the run's binary.
func (r *rateLimitServices) start(ctx context.Context, host string) (*ratelimitsvc.Service, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ratelimitsvc.ErrNoRedis // before a build that would be of no use
	}
	bin, err := r.binary(ctx)
	if err != nil {
		return nil, err
	}
	return ratelimitsvc.Start(ctx, ratelimitsvc.Options{Config: serviceConfig, Log: r.log, Binary: bin, Host: host})
}

var _ stepdefs.RateLimitServices = (*rateLimitServices)(nil)

// Shared implements stepdefs.RateLimitServices.
func (r *rateLimitServices) Shared(ctx context.Context) (string, error) {
	if r.external != "" {
		return r.external, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.started = true
		host, ok := serviceAddr(r.target)
		if !ok {
			r.err = fmt.Errorf("the %s target's proxy cannot reach a service on this machine: name one with --ratelimit-service", r.target.Name())
			return "", r.err
		}
		r.shared, r.err = r.start(ctx, host)
		if r.err != nil {
			r.err = serviceMissing(fmt.Errorf("starting the global rate-limit service: %w", r.err))
		}
	}
	if r.err != nil {
		return "", r.err
	}
	return r.shared.Addr, nil
}

// Own implements stepdefs.RateLimitServices.
func (r *rateLimitServices) Own(ctx context.Context) (stepdefs.OwnRateLimitService, error) {
	if r.external != "" {
		return nil, errors.New("the scenario stops and restarts a rate-limit service of its own, which the suite runs only without --ratelimit-service")
	}
	host, ok := serviceAddr(r.target)
	if !ok {
		return nil, fmt.Errorf("the %s target's proxy cannot reach a service on this machine", r.target.Name())
	}
	s, err := r.start(ctx, host)
	if err != nil {
		return nil, serviceMissing(fmt.Errorf("starting a rate-limit service for the scenario: %w", err))
	}
	return s, nil
}

// serviceMissing: the suite could not start the rate-limit service it
// runs itself, which is the suite's environment, never the proxy. The fix
// names what was missing where it is known.
func serviceMissing(err error) error {
	what, fix := "a global rate-limit service", "see the error; or name a running one with --ratelimit-service"
	switch {
	case errors.Is(err, ratelimitsvc.ErrNoRedis):
		what, fix = "redis-server (the rate-limit service's store)", "apt-get install redis-server (Debian), or name a running service with --ratelimit-service"
	case errors.Is(err, ratelimitsvc.ErrNoGo):
		what, fix = "the Go toolchain, which builds github.com/envoyproxy/ratelimit (the global rate-limit service) on first use", "install Go 1.26+, set $"+ratelimitsvc.EnvBin+" to a built service, or name a running one with --ratelimit-service"
	case errors.Is(err, toolbin.ErrNoNetwork):
		what, fix = "github.com/envoyproxy/ratelimit (the global rate-limit service), which cannot be built without the Go module proxy", "let go reach the Go module proxy once, set $"+ratelimitsvc.EnvBin+" to a built service, or name a running one with --ratelimit-service"
	}
	return targets.Missing(what, fix, err)
}

// serviceAddr is where services for the target's proxy listen.
func serviceAddr(t targets.Target) (string, bool) {
	if sh, ok := t.(targets.ServiceHost); ok {
		return sh.ServiceAddr()
	}
	return "", false
}

// stop stops the shared service, if the suite started one.
func (r *rateLimitServices) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shared != nil {
		r.shared.Stop()
		r.shared = nil
	}
}

// lockedWriter writes to w holding mu: the runner's lock, so that a line
// of a service's progress never falls between the lines of a result.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
