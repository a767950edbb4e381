package e2e

import (
	"os/exec"
	"syscall"
)

// setSysProcAttr makes the kernel kill caddy if the test process dies
// without cleaning up (a panic, a -timeout), so no server outlives its test.
func setSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
