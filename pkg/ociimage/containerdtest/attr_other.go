//go:build !linux

package containerdtest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
