package ratelimitsvc

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestStartFailureLeavesNothing: a service that exits at start is tried
// on new ports, then Start fails with why, returns nil without panicking
// (a nil *Service used to be stopped), and leaves no state directory.
func TestStartFailureLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // Start's state directory goes there
	s, err := Start(context.Background(), Options{Binary: "/bin/false"})
	if errors.Is(err, ErrNoRedis) {
		t.Skip("redis-server is not installed (make redis-server)")
	}
	if s != nil || !errors.Is(err, errExitedAtStart) {
		t.Fatalf("Start with a binary that exits: %v, %v; want nil and an error saying it exited at start", s, err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
