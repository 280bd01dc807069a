package containerdtest

import "syscall"

// sysProcAttr kills containerd if the test process dies without running
// its cleanups (a Ctrl-C, a panic in another goroutine).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
