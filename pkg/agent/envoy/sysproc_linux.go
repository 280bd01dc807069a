package envoy

import "syscall"

// sysProcAttr has the kernel kill the proxy when the agent dies, so a
// crashed agent never leaves an orphaned proxy holding its ports.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
