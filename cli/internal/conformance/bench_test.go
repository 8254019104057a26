package conformance

import (
	"fmt"
	"io"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
	"github.com/gwdiag/gwdiag/steps"
)

// BenchmarkCheck checks a followed capture as `gwdiag conformance check`
// does, trace by trace.
func BenchmarkCheck(b *testing.B) {
	ssetest.Bench(b, ssetest.Options{IDs: true}, func(_ *testing.B, path string, _ int) error {
		check := steps.NewRecordedCheck(steps.Implementation{})
		checkFile(io.Discard, check, path, nil)
		if rep := check.Report(); rep.Failed() || rep.Summary.Passed == 0 {
			return fmt.Errorf("check of a valid capture: %+v", rep.Summary)
		}
		return nil
	})
}
