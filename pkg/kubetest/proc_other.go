//go:build !linux

package kubetest

import "syscall"

// dieWithParent has no parent-death signal off Linux: Stop is the only
// cleanup there.
func dieWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
