package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
)

// globalUnits maps a policy's unit to the service's (limitOverride).
var globalUnits = map[v1alpha1.GlobalRateLimitUnit]string{"Seconds": "second", "Minutes": "minute", "Hours": "hour", "Days": "day"}

// remoteRateLimit translates a policy's spec.traffic.rateLimit.global into
// the data plane's remoteRateLimit: the Service by its cluster DNS name
// (in the policy's namespace unless the reference names another), each
// entry's expression as the descriptor value, a limit as a limitOverride.
// It assumes a spec that Validate accepted.
func remoteRateLimit(namespace string, g *v1alpha1.GlobalRateLimit) *config.RemoteRateLimit {
	ns := namespace
	if g.BackendRef.Namespace != nil {
		ns = string(*g.BackendRef.Namespace)
	}
	var port int32
	if g.BackendRef.Port != nil {
		port = int32(*g.BackendRef.Port)
	}
	r := &config.RemoteRateLimit{
		Host:        fmt.Sprintf("%s.%s.svc:%d", g.BackendRef.Name, ns, port),
		Domain:      g.Domain,
		FailureMode: string(remote.FailClosed),
	}
	if g.FailureMode != nil && *g.FailureMode == v1alpha1.FailOpen {
		r.FailureMode = string(remote.FailOpen)
	}
	for _, d := range g.Descriptors {
		cd := config.RateLimitDescriptor{Type: "requests"}
		if d.Type != nil && *d.Type == v1alpha1.DescriptorTokens {
			cd.Type = "tokens"
		}
		for _, e := range d.Entries {
			cd.Entries = append(cd.Entries, config.DescriptorEntry{Key: e.Name, Value: e.Expression})
		}
		if d.Limit != nil {
			cd.LimitOverride = fmt.Sprintf(`{"unit": %s, "requestsPerUnit": %d}`, strconv.Quote(globalUnits[d.Limit.Unit]), d.Limit.Amount)
		}
		r.Descriptors = append(r.Descriptors, cd)
	}
	return r
}

// validateGlobal checks what the CRD schema cannot: that each expression
// compiles, as the data plane will compile it.
func validateGlobal(g *v1alpha1.GlobalRateLimit) []error {
	const path = "spec.traffic.rateLimit.global"
	var errs []error
	if g.BackendRef.Port == nil {
		errs = append(errs, fmt.Errorf("%s.backendRef.port: required", path))
	}
	if k := g.BackendRef.Kind; k != nil && *k != "Service" {
		errs = append(errs, fmt.Errorf("%s.backendRef.kind: must be Service, got %q", path, *k))
	}
	if strings.TrimSpace(g.Domain) == "" {
		errs = append(errs, fmt.Errorf("%s.domain: required", path))
	}
	if n := len(g.Descriptors); n < 1 || n > 16 {
		errs = append(errs, fmt.Errorf("%s.descriptors: must have 1 to 16 entries, got %d", path, n))
	}
	for i, d := range g.Descriptors {
		if len(d.Entries) == 0 {
			errs = append(errs, fmt.Errorf("%s.descriptors[%d].entries: must have 1 to 16 entries, got 0", path, i))
		}
		for j, e := range d.Entries {
			if _, err := remote.Compile(e.Expression); err != nil {
				errs = append(errs, fmt.Errorf("%s.descriptors[%d].entries[%d].expression: %s", path, i, j, firstLine(err.Error())))
			}
		}
		if d.Limit != nil {
			if _, ok := globalUnits[d.Limit.Unit]; !ok {
				errs = append(errs, fmt.Errorf("%s.descriptors[%d].limit.unit: must be Seconds, Minutes, Hours or Days, got %q", path, i, d.Limit.Unit))
			}
			if d.Limit.Amount < 1 || d.Limit.Amount > 1<<32-1 {
				errs = append(errs, fmt.Errorf("%s.descriptors[%d].limit.amount: must be 1 to 4294967295, got %d", path, i, d.Limit.Amount))
			}
		}
	}
	return errs
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
