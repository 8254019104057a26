//go:build unix && !linux

package toolbin

import (
	"os/exec"
	"syscall"
)

// DieWithParent puts cmd, not yet started, in a process group of its own
// with group. Only Linux can end a child when its parent is killed
// (Pdeathsig): elsewhere a child outlives a SIGKILL of this process, and
// its owner's clean-up on exit or signal is what stops it.
func DieWithParent(cmd *exec.Cmd, group bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
}
