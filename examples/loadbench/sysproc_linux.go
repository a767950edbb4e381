package main

import (
	"os/exec"
	"syscall"
)

// setSysProcAttr makes the kernel kill caddy if the benchmark dies without
// stopping it, so no server outlives a run.
func setSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
