package controller

import (
	"errors"
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

// Validate reports what is wrong with a policy's spec, naming the field by
// its path (spec.traffic.rateLimit.local[1].unit: ...). It checks what the
// CRD schema cannot or may not (a cluster may carry an older, looser CRD):
// one target kind per policy, every rate-limit entry through
// ratelimit.FromPolicy, the mapping the data plane uses, and every global
// descriptor expression through the data plane's CEL compiler.
func Validate(spec v1alpha1.GatewayPolicySpec) error {
	var errs []error
	if n := len(spec.TargetRefs); n < 1 || n > 16 {
		errs = append(errs, fmt.Errorf("spec.targetRefs: must have 1 to 16 entries, got %d", n))
	}
	for i, t := range spec.TargetRefs {
		if t.Group != gwv1.GroupName {
			errs = append(errs, fmt.Errorf("spec.targetRefs[%d].group: must be %s, got %q", i, gwv1.GroupName, t.Group))
		}
		if t.Kind != "HTTPRoute" && t.Kind != "Gateway" {
			errs = append(errs, fmt.Errorf("spec.targetRefs[%d].kind: must be HTTPRoute or Gateway, got %q", i, t.Kind))
		} else if i > 0 && t.Kind != spec.TargetRefs[0].Kind {
			errs = append(errs, fmt.Errorf("spec.targetRefs[%d].kind: all targets of a policy must be of one kind, got %s after %s", i, t.Kind, spec.TargetRefs[0].Kind))
		}
	}
	if spec.Traffic != nil && spec.Traffic.RateLimit != nil {
		local := spec.Traffic.RateLimit.Local
		if len(local) > 16 {
			errs = append(errs, fmt.Errorf("spec.traffic.rateLimit.local: must have at most 16 entries, got %d", len(local)))
		}
		for i, e := range local {
			if _, err := fromPolicy(e); err != nil {
				errs = append(errs, fmt.Errorf("spec.traffic.rateLimit.local[%d].%w", i, err))
			}
			if e.Key != "" {
				if _, err := celexpr.CompileRequest(e.Key, celexpr.Scalar); err != nil {
					errs = append(errs, fmt.Errorf("spec.traffic.rateLimit.local[%d].key: CEL: %w", i, err))
				}
			}
		}
		if g := spec.Traffic.RateLimit.Global; g != nil {
			errs = append(errs, validateGlobal(g)...)
		}
	}
	return errors.Join(errs...)
}

// fromPolicy maps one entry with ratelimit.FromPolicy, first rejecting the
// negative numbers its unsigned fields cannot hold.
func fromPolicy(e v1alpha1.LocalRateLimit) (ratelimit.Spec, error) {
	var pe ratelimit.PolicyEntry
	pe.Unit = string(e.Unit)
	for _, f := range []struct {
		name string
		in   *int64
		out  **uint64
		min  int64
	}{{"requests", e.Requests, &pe.Requests, 1}, {"tokens", e.Tokens, &pe.Tokens, 1}, {"burst", e.Burst, &pe.Burst, 0}} {
		if f.in == nil {
			continue
		}
		if *f.in < f.min {
			return ratelimit.Spec{}, &ratelimit.FieldError{Field: f.name, Msg: fmt.Sprintf("must be >= %d, got %d", f.min, *f.in)}
		}
		v := uint64(*f.in)
		*f.out = &v
	}
	return ratelimit.FromPolicy(pe)
}
