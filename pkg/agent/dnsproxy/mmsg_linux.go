package dnsproxy

import (
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// mmsgConn reads with recvmmsg into the caller's messages and writes each
// source address into the *net.UDPAddr the message already holds, so a
// reader that keeps its messages allocates nothing per datagram
// (golang.org/x/net's ReadBatch makes a new address and IP slice for
// every one). The address is overwritten by the next read: keep a copy.
// Writes are mmsgWriter's. Reads and writes of messages with other than
// one buffer go through x/net.
type mmsgConn struct {
	batchConn // x/net's PacketConn
	rc        syscall.RawConn

	mu    sync.Mutex // the scratch below: one read at a time
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrAny
	// One call's recvmmsg, made once (a closure per call would escape).
	recv      func(fd uintptr) bool
	want, got int
	errno     syscall.Errno

	w mmsgWriter
}

func newBatchConn(conn *net.UDPConn) batchConn {
	x := xnetBatchConn(conn)
	rc, err := conn.SyscallConn()
	if err != nil {
		return x
	}
	c := &mmsgConn{batchConn: x, rc: rc}
	c.recv = c.recvmmsg
	// The socket's own family, not its address's: Go binds "udp" on
	// 0.0.0.0 as a dual-stack IPv6 socket.
	_ = rc.Control(func(fd uintptr) {
		sa, err := unix.Getsockname(int(fd))
		_, c.w.v4 = sa.(*unix.SockaddrInet4)
		c.w.ok = err == nil
	})
	return c
}

// recvmmsg is RawConn.Read's callback: false to wait until readable.
func (c *mmsgConn) recvmmsg(fd uintptr) bool {
	var wait bool
	c.got, c.errno, wait = rawMmsg(unix.SYS_RECVMMSG, fd, &c.hdrs[0], c.want)
	return !wait
}

// rawMmsg makes one recvmmsg or sendmmsg (trap) of n headers on fd as a
// raw system call (mmsgwrite_linux.go says why): the socket is
// non-blocking, so the call never waits. EINTR is retried; wait is true on
// EAGAIN, for the caller to wait on the netpoller.
func rawMmsg(trap, fd uintptr, hdrs *unix.Mmsghdr, n int) (got int, errno syscall.Errno, wait bool) {
	for {
		r, _, e := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(hdrs)), uintptr(n), 0, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, 0, true
		}
		return int(r), e, false
	}
}

// ReadBatch reads up to len(ms) datagrams; it blocks until one arrives.
// flags other than 0 go through x/net.
func (c *mmsgConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	if flags != 0 {
		return c.batchConn.ReadBatch(ms, flags)
	}
	for i := range ms {
		if len(ms[i].Buffers) != 1 || len(ms[i].Buffers[0]) == 0 {
			return c.batchConn.ReadBatch(ms, flags)
		}
	}
	if len(ms) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.hdrs) < len(ms) {
		c.hdrs = make([]unix.Mmsghdr, len(ms))
		c.iovs = make([]unix.Iovec, len(ms))
		c.names = make([]unix.RawSockaddrAny, len(ms))
	}
	for i := range ms {
		b := ms[i].Buffers[0]
		c.iovs[i].Base = &b[0]
		c.iovs[i].SetLen(len(b))
		c.hdrs[i] = unix.Mmsghdr{Hdr: unix.Msghdr{
			Name: (*byte)(unsafe.Pointer(&c.names[i])), Namelen: unix.SizeofSockaddrAny,
			Iov: &c.iovs[i], Iovlen: 1,
		}}
	}
	c.want = len(ms)
	if err := c.rc.Read(c.recv); err != nil {
		return 0, err
	}
	n := c.got
	if c.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", c.errno)
	}
	for i := range n {
		m, h := &ms[i], &c.hdrs[i]
		m.N, m.NN, m.Flags = int(h.Len), 0, int(h.Hdr.Flags)
		m.Addr = intoUDPAddr(m.Addr, &c.names[i])
	}
	return n, nil
}

// intoUDPAddr is sa as a *net.UDPAddr: prev's, overwritten, when prev is
// one; nil for a family other than IPv4 and IPv6.
func intoUDPAddr(prev net.Addr, sa *unix.RawSockaddrAny) net.Addr {
	a, _ := prev.(*net.UDPAddr)
	if a == nil {
		a = &net.UDPAddr{IP: make(net.IP, 0, net.IPv6len)}
	}
	switch sa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		a.IP = append(a.IP[:0], p.Addr[:]...)
		a.Port = netPort(&p.Port)
		a.Zone = ""
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		a.IP = append(a.IP[:0], p.Addr[:]...)
		a.Port = netPort(&p.Port)
		a.Zone = ""
		if p.Scope_id != 0 {
			a.Zone = strconv.FormatUint(uint64(p.Scope_id), 10)
		}
	default:
		return nil
	}
	return a
}

// netPort reads a port stored in network byte order.
func netPort(p *uint16) int {
	b := (*[2]byte)(unsafe.Pointer(p))
	return int(b[0])<<8 | int(b[1])
}
