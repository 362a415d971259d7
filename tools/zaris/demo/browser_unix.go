//go:build unix

package demo

import (
	"os/exec"
	"syscall"
)

// inOwnProcessGroup starts cmd in a process group of its own and, when its context ends,
// kills the whole group: the browser's helper processes as well as the browser.
func inOwnProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
