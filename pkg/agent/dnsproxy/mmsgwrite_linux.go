package dnsproxy

import (
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// mmsgWriter is mmsgConn's sendmmsg. The call is made without telling the
// Go scheduler (RawSyscall): a send on a non-blocking UDP socket never
// waits, and a P marked as in a system call is handed to another thread by
// sysmon once the call runs past sysmon's 20 µs tick, which on a busy
// machine a send often does while the kernel delivers its datagrams on
// loopback. Each handoff wakes a thread, and sysmon keeps polling at 20 µs
// while it finds them (docs/benchmarks.md, DNS proxy).
type mmsgWriter struct {
	ok bool // the socket's family is known: otherwise every write is x/net's
	v4 bool // the socket is IPv4: destinations are written as sockaddr_in
}

// sendScratch is one sendmmsg call's headers. Writers to one socket (the
// replies of every upstream socket's reader go out on the client-facing
// one) each take their own from sendScratches.
type sendScratch struct {
	hdrs  [udpBatch]unix.Mmsghdr
	iovs  [udpBatch]unix.Iovec
	names [udpBatch]unix.RawSockaddrAny
	want  int
	got   int
	errno syscall.Errno
	send  func(fd uintptr) bool // s.sendmmsg, bound once
}

var sendScratches = sync.Pool{New: func() any {
	s := new(sendScratch)
	s.send = s.sendmmsg
	return s
}}

// sendmmsg is RawConn.Write's callback: false to wait until writable.
func (s *sendScratch) sendmmsg(fd uintptr) bool {
	var wait bool
	s.got, s.errno, wait = rawMmsg(unix.SYS_SENDMMSG, fd, &s.hdrs[0], s.want)
	return !wait
}

// WriteBatch sends up to udpBatch messages of ms with one sendmmsg and
// returns how many left. Messages with other than one buffer, destinations
// of the other family or with a zone, and flags other than 0 go through
// x/net.
func (c *mmsgConn) WriteBatch(ms []ipv4.Message, flags int) (int, error) {
	if flags != 0 || len(ms) == 0 || !c.w.ok {
		return c.batchConn.WriteBatch(ms, flags)
	}
	ms = ms[:min(len(ms), udpBatch)]
	s := sendScratches.Get().(*sendScratch)
	defer func() {
		clear(s.iovs[:len(ms)]) // back to the pool without pointers into ms
		sendScratches.Put(s)
	}()
	for i := range ms {
		if len(ms[i].Buffers) != 1 {
			return c.batchConn.WriteBatch(ms, flags)
		}
		b := ms[i].Buffers[0]
		s.iovs[i] = unix.Iovec{}
		if len(b) > 0 {
			s.iovs[i].Base = &b[0]
			s.iovs[i].SetLen(len(b))
		}
		s.hdrs[i] = unix.Mmsghdr{Hdr: unix.Msghdr{Iov: &s.iovs[i], Iovlen: 1}}
		if ms[i].Addr != nil {
			n, ok := c.w.putAddr(&s.names[i], ms[i].Addr)
			if !ok {
				return c.batchConn.WriteBatch(ms, flags)
			}
			s.hdrs[i].Hdr.Name, s.hdrs[i].Hdr.Namelen = (*byte)(unsafe.Pointer(&s.names[i])), n
		}
	}
	s.want = len(ms)
	if err := c.rc.Write(s.send); err != nil {
		return 0, err
	}
	if s.errno != 0 {
		return 0, os.NewSyscallError("sendmmsg", s.errno)
	}
	return s.got, nil
}

// putAddr writes a into sa in the socket's family and returns its length;
// false for an address it cannot write (the caller falls back to x/net).
func (w mmsgWriter) putAddr(sa *unix.RawSockaddrAny, a net.Addr) (uint32, bool) {
	u, ok := a.(*net.UDPAddr)
	if !ok || u.Zone != "" {
		return 0, false
	}
	if w.v4 {
		ip := u.IP.To4()
		if ip == nil {
			return 0, false
		}
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*p = unix.RawSockaddrInet4{Family: unix.AF_INET}
		copy(p.Addr[:], ip)
		putNetPort(&p.Port, u.Port)
		return unix.SizeofSockaddrInet4, true
	}
	ip := u.IP.To16()
	if ip == nil {
		return 0, false
	}
	p := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
	*p = unix.RawSockaddrInet6{Family: unix.AF_INET6}
	copy(p.Addr[:], ip)
	putNetPort(&p.Port, u.Port)
	return unix.SizeofSockaddrInet6, true
}

// putNetPort stores port in network byte order.
func putNetPort(p *uint16, port int) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(port>>8), byte(port)
}
