//go:build !linux

package envoy

import "syscall"

// sysProcAttr is nil off Linux, which has no parent-death signal: a proxy
// outlives an agent that is killed without draining it.
func sysProcAttr() *syscall.SysProcAttr { return nil }
