//go:build !unix

package toolbin

import "os/exec"

// DieWithParent does nothing where there are neither process groups nor
// Pdeathsig: its owner's clean-up on exit is what stops cmd.
func DieWithParent(cmd *exec.Cmd, group bool) {}
