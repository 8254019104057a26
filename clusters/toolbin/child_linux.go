package toolbin

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes cmd, not yet started, die when this process does
// (Pdeathsig: even a SIGKILL of this process ends it), and, with group,
// puts it in a process group of its own, so that a Ctrl-C of the terminal
// reaches this process alone, which stops the child in its own order.
func DieWithParent(cmd *exec.Cmd, group bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group, Pdeathsig: syscall.SIGKILL}
}
