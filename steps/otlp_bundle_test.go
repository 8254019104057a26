package steps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/stepdefs"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// TestOTLPBundleHoldsTheSpans: a failed otlp-export scenario's bundle
// keeps what the scenario's collector received (stepdefs.SpansFile), the
// evidence of how the spans disagreed with the trace.
func TestOTLPBundleHoldsTheSpans(t *testing.T) {
	t.Parallel()
	tt := faultCase{fault: "spans disagree with the trace on status", claimAll: true}
	for _, c := range faultCases {
		if c.fault == tt.fault {
			tt = c
		}
	}
	rep := checkFaultOn(t, inprocess.New(faults[tt.fault].proxyOptions...), tt, "@otlp-export", nil)
	var dir string
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			if s.Name == "A forwarded request's spans agree with its trace" {
				dir = s.Bundle
			}
		}
	}
	if dir == "" {
		t.Fatal("the failed scenario left no bundle")
	}
	b, err := os.ReadFile(filepath.Join(dir, stepdefs.SpansFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"http.response.status_code": 201`) || !strings.Contains(string(b), "SPAN_KIND_CLIENT") {
		t.Errorf("%s does not show the spans the collector received:\n%s", stepdefs.SpansFile, b)
	}
}
