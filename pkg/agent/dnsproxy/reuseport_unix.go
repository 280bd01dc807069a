//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package dnsproxy

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// haveReusePort says several UDP sockets can share a port, each read by
// its own goroutine, so the kernel spreads queries over cores.
const haveReusePort = true

// reusePort sets SO_REUSEPORT on a socket before it is bound.
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}
