// Package origdst recovers the destination a redirected connection was
// really sent to (SO_ORIGINAL_DST), and makes sockets that netfilter's owner
// match sees as another uid/gid, without a child process.
package origdst

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// soOriginalDst is SO_ORIGINAL_DST (IPv4, SOL_IP) and IP6T_SO_ORIGINAL_DST (IPv6, SOL_IPV6).
const soOriginalDst = 80

// Of returns the original destination of a TCP connection accepted after a
// netfilter REDIRECT or DNAT.
func Of(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var out netip.AddrPort
	var serr error
	v6 := c.LocalAddr().(*net.TCPAddr).IP.To4() == nil
	err = raw.Control(func(fd uintptr) {
		if v6 {
			var sa unix.RawSockaddrInet6
			sz := uint32(unix.SizeofSockaddrInet6)
			serr = getsockopt(fd, unix.SOL_IPV6, soOriginalDst, unsafePointer(&sa), &sz)
			port := binary.BigEndian.Uint16((*[2]byte)(unsafePointer(&sa.Port))[:])
			out = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port)
			return
		}
		var sa unix.RawSockaddrInet4
		sz := uint32(unix.SizeofSockaddrInet4)
		serr = getsockopt(fd, unix.SOL_IP, soOriginalDst, unsafePointer(&sa), &sz)
		port := binary.BigEndian.Uint16((*[2]byte)(unsafePointer(&sa.Port))[:])
		out = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port)
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockopt SO_ORIGINAL_DST: %w", serr)
	}
	return out, nil
}

// DialAs connects a TCP socket that netfilter's owner match attributes to
// uid and gid. The socket is created on a thread whose filesystem uid and gid
// are switched just for the socket(2) call (netfilter reads the socket
// file's credentials), so it needs CAP_SETUID/CAP_SETGID but no child process.
func DialAs(dst netip.AddrPort, uid, gid uint32, timeout time.Duration) (*net.TCPConn, error) {
	c, err := socketAs(unix.SOCK_STREAM, dst, uid, gid, func(fd int, sa unix.Sockaddr) error {
		tv := unix.Timeval{Sec: int64(timeout / time.Second), Usec: int64(timeout % time.Second / time.Microsecond)}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
			return fmt.Errorf("set connect timeout: %w", err)
		}
		return connect(fd, sa, dst, uid)
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// DialUDPAs returns a connected UDP socket that netfilter's owner match
// attributes to uid and gid, made like DialAs.
func DialUDPAs(dst netip.AddrPort, uid, gid uint32) (*net.UDPConn, error) {
	c, err := socketAs(unix.SOCK_DGRAM, dst, uid, gid, func(fd int, sa unix.Sockaddr) error { return connect(fd, sa, dst, uid) })
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

// ListenUDPAs binds a UDP socket that netfilter's owner match attributes to
// uid and gid, as the DNS proxy's socket is when the agent runs as the proxy user.
func ListenUDPAs(addr netip.AddrPort, uid, gid uint32) (*net.UDPConn, error) {
	c, err := socketAs(unix.SOCK_DGRAM, addr, uid, gid, func(fd int, sa unix.Sockaddr) error {
		if err := unix.Bind(fd, sa); err != nil {
			return fmt.Errorf("bind %s: %w", addr, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

func connect(fd int, sa unix.Sockaddr, dst netip.AddrPort, uid uint32) error {
	if err := unix.Connect(fd, sa); err != nil {
		return fmt.Errorf("connect %s as uid %d: %w", dst, uid, err)
	}
	return nil
}

// socketAs makes a socket of typ for addr's family owned by uid/gid, lets
// setup bind or connect it, and wraps it as a net.Conn (a UDP one from
// net.FilePacketConn when it is only bound).
func socketAs(typ int, addr netip.AddrPort, uid, gid uint32, setup func(fd int, sa unix.Sockaddr) error) (any, error) {
	domain := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	if a := addr.Addr().Unmap(); a.Is4() {
		domain = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: a.As4()}
	}
	fd, err := socketTypeAs(domain, typ, uid, gid)
	if err != nil {
		return nil, err
	}
	if err := setup(fd, sa); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := fileFromFD(fd)
	defer f.Close()
	if c, err := net.FileConn(f); err == nil {
		return c, nil
	}
	return net.FilePacketConn(f)
}

func socketTypeAs(domain, typ int, uid, gid uint32) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// setfsuid/setfsgid are per thread; Go's syscall.Setuid would change every thread.
	oldGID, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0)
	oldUID, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, oldUID, 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSGID, oldGID, 0, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	return fd, nil
}
