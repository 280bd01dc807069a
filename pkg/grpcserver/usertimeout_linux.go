package grpcserver

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on a TCP socket, as grpc-go's
// server does when keepalive is on: data the peer leaves unacknowledged
// for d ends the connection even while pings are not due.
func setUserTimeout(nc net.Conn, d time.Duration) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	})
}
