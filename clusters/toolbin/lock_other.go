//go:build !unix

package toolbin

// lockFile is a no-op where flock is not available: parallel builds there
// only cost time, since each output is renamed into place whole.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
