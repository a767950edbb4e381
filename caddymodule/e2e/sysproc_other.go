//go:build !linux

package e2e

import "os/exec"

// setSysProcAttr has nothing to set where the kernel cannot tie caddy's
// life to the test process; Cleanup stops it.
func setSysProcAttr(*exec.Cmd) {}
