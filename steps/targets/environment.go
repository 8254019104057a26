package targets

// EnvironmentError says that the suite's own environment lacks something a
// scenario or a target needs (Docker, Redis, the rate-limit service, a
// cluster, a free port): nothing of the proxy under test. The suite
// reports what it kept from running as not run, with Fix, never as failed.
type EnvironmentError struct {
	// What is missing, in a few words ("the Docker daemon", "redis-server").
	What string
	// Fix says in one line what to do about it.
	Fix string
	Err error
}

func (e *EnvironmentError) Error() string {
	if e.Err == nil {
		return e.Summary()
	}
	return e.Summary() + ": " + e.Err.Error()
}

// Summary is what is missing and the fix, without the cause: the same for
// every scenario the same lack kept from running.
func (e *EnvironmentError) Summary() string {
	s := "the suite's environment lacks " + e.What
	if e.Fix != "" {
		s += " (fix: " + e.Fix + ")"
	}
	return s
}

func (e *EnvironmentError) Unwrap() error { return e.Err }

// Missing wraps err as the lack of what, with its fix.
func Missing(what, fix string, err error) error {
	return &EnvironmentError{What: what, Fix: fix, Err: err}
}
