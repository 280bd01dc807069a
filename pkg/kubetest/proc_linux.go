package kubetest

import "syscall"

// dieWithParent makes the kernel kill a server if the test process dies
// first, so no etcd or kube-apiserver outlives a crashed test.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
