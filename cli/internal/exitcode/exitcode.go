// Package exitcode says which exit status a gwdiag error asks for: 2 for a
// usage error (a bad flag, argument or command name: the user must change the
// command line), 1 for any other failure (the command ran and something was
// wrong), or a status of the command's own (trace diff's 1 for "differ").
// Commands mark their usage errors with Usage; main exits with Code.
package exitcode

import (
	"errors"
	"fmt"
)

// coder is an error that asks for an exit status.
type coder interface {
	ExitCode() int
}

// usage is a usage error.
type usage struct{ error }

func (usage) ExitCode() int   { return 2 }
func (u usage) Unwrap() error { return u.error }

// Usage marks err as a usage error; nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usage{err}
}

// Usagef is Usage(fmt.Errorf(format, args...)).
func Usagef(format string, args ...any) error { return usage{fmt.Errorf(format, args...)} }

// Code is the exit status for err: 0 for nil, the one it asks for, else 1.
func Code(err error) int {
	if err == nil {
		return 0
	}
	var c coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return 1
}
