package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// rtnl is one NETLINK_ROUTE socket of the calling thread's namespace, used
// with plain blocking system calls: a request is one send and the receive
// of its acknowledgement, a dump one send and the receives up to its end.
// TPROXY routing needs a handful of rule, route and address messages, so
// they are written here rather than through a general netlink library.
type rtnl struct {
	fd  int
	seq uint32
	buf []byte
}

func dialRtnl() (*rtnl, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind rtnetlink: %w", err)
	}
	// Errors carry only the header of the message they answer.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return &rtnl{fd: fd, buf: make([]byte, 64<<10)}, nil
}

func (r *rtnl) close() { unix.Close(r.fd) }

// do sends one request and waits for its acknowledgement.
func (r *rtnl) do(typ, flags uint16, body []byte) error {
	seq, err := r.send(typ, flags|unix.NLM_F_ACK, body)
	if err != nil {
		return err
	}
	return r.recv(seq, nil)
}

// dump sends a dump request and calls fn with the body of each message of
// the answer.
func (r *rtnl) dump(typ uint16, body []byte, fn func(body []byte)) error {
	seq, err := r.send(typ, unix.NLM_F_DUMP, body)
	if err != nil {
		return err
	}
	return r.recv(seq, fn)
}

func (r *rtnl) send(typ, flags uint16, body []byte) (uint32, error) {
	r.seq++
	b := make([]byte, 0, unix.NLMSG_HDRLEN+len(body))
	b = binary.NativeEndian.AppendUint32(b, uint32(unix.NLMSG_HDRLEN+len(body)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags|unix.NLM_F_REQUEST)
	b = binary.NativeEndian.AppendUint32(b, r.seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, body...)
	if err := unix.Sendto(r.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("send rtnetlink message: %w", err)
	}
	return r.seq, nil
}

// recv reads the answer to the message seq: an acknowledgement or error
// ends it, and so does the end of a dump, whose messages go to fn.
func (r *rtnl) recv(seq uint32, fn func(body []byte)) error {
	for {
		n, _, err := unix.Recvfrom(r.fd, r.buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("receive rtnetlink answer: %w", err)
		}
		for b := r.buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return errors.New("malformed rtnetlink answer")
			}
			typ, mseq, body := binary.NativeEndian.Uint16(b[4:]), binary.NativeEndian.Uint32(b[8:]), b[unix.NLMSG_HDRLEN:l]
			b = b[min(nlAlign(l), len(b)):]
			if mseq != seq {
				continue // an answer to an earlier request
			}
			switch typ {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return errors.New("malformed rtnetlink error")
				}
				if errno := -int32(binary.NativeEndian.Uint32(body)); errno != 0 {
					return syscall.Errno(errno)
				}
				return nil
			default:
				if fn != nil {
					fn(body)
				}
			}
		}
	}
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

// appendAttr appends a route attribute (rtattr), padded.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func appendAttrU32(b []byte, typ uint16, v uint32) []byte {
	return appendAttr(b, typ, binary.NativeEndian.AppendUint32(nil, v))
}

// attrs calls fn with each route attribute of b.
func attrs(b []byte, fn func(typ uint16, data []byte)) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^unix.NLA_F_NESTED, b[4:l])
		b = b[min(nlAlign(l), len(b)):]
	}
}
