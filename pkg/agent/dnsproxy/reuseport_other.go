//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package dnsproxy

import "syscall"

// haveReusePort is false: one UDP reader per address.
const haveReusePort = false

// reusePort does nothing where SO_REUSEPORT is not available.
func reusePort(network, address string, c syscall.RawConn) error { return nil }
