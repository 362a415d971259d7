//go:build !unix

package demo

import "os/exec"

// inOwnProcessGroup leaves cmd as it is: where there are no process groups, a browser
// whose context ends is killed alone.
func inOwnProcessGroup(cmd *exec.Cmd) {}
