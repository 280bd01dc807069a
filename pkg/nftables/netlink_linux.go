package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// conn is one NETLINK_NETFILTER socket, used with plain blocking system
// calls: a query is one send and the receives of its answer, and a batch is
// one send and the drain of its acknowledgement. The kernel handles a
// message inside the sendmsg call that carries it, so its answer is queued
// by the time the call returns. One socket serves a whole Apply.
type conn struct {
	fd  int
	seq uint32
	buf []byte
}

// dial opens the socket in the namespace of the descriptor netns (0 is the
// calling thread's). A socket stays in the namespace it was created in.
func dial(netns int) (*conn, error) {
	var fd int
	var err error
	if netns == 0 {
		fd, err = socket()
	} else {
		fd, err = socketIn(netns)
	}
	if err != nil {
		return nil, fmt.Errorf("nftables: open netlink: %w", err)
	}
	// Errors carry only the header of the message they answer.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return &conn{fd: fd, buf: make([]byte, 64<<10)}, nil
}

func socket() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// socketIn creates the socket on a thread of its own that enters netns; the
// thread goes back to its namespace, or is discarded if it cannot.
func socketIn(netns int) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("enter netns: %w", err)}
			return
		}
		fd, err := socket()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // else the thread ends with the goroutine
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

func (c *conn) close() { unix.Close(c.fd) }

// message appends one nftables message of type typ (NFT_MSG_*) to b.
func appendMessage(b []byte, typ uint16, flags uint16, seq uint32, family byte, attrs []byte) []byte {
	n := unix.NLMSG_HDRLEN + 4 + len(attrs)
	b = binary.NativeEndian.AppendUint32(b, uint32(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, family, unix.NFNETLINK_V0, 0, 0)
	b = append(b, attrs...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func nftType(msg int) uint16 { return uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | msg) }

// nlMessage is one message of an answer: its header and its nftables
// attributes (after the nfgenmsg header).
type nlMessage struct {
	typ   uint16
	flags uint16
	seq   uint32
	attrs []byte
}

// errKernel is an error answer from the kernel: the errno of the message with sequence seq.
type errKernel struct {
	seq   uint32
	errno syscall.Errno
}

func (e *errKernel) Error() string { return e.errno.Error() }
func (e *errKernel) Unwrap() error { return e.errno }

// parse splits a datagram into messages; an error answer becomes *errKernel
// (errno 0 is an acknowledgement, returned as a message of type NLMSG_ERROR).
func parse(b []byte, fn func(m nlMessage) error) error {
	for len(b) >= unix.NLMSG_HDRLEN {
		n := int(binary.NativeEndian.Uint32(b))
		if n < unix.NLMSG_HDRLEN || n > len(b) {
			return errors.New("nftables: malformed netlink message")
		}
		m := nlMessage{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
		}
		body := b[unix.NLMSG_HDRLEN:n]
		switch m.typ {
		case unix.NLMSG_ERROR:
			if len(body) < 4 {
				return errors.New("nftables: short netlink error message")
			}
			if errno := -int32(binary.NativeEndian.Uint32(body)); errno != 0 {
				return &errKernel{seq: m.seq, errno: syscall.Errno(errno)}
			}
		case unix.NLMSG_DONE, unix.NLMSG_NOOP:
		default:
			if len(body) >= 4 {
				m.attrs = body[4:]
			}
		}
		if err := fn(m); err != nil {
			return err
		}
		if a := (n + 3) &^ 3; a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
	}
	return nil
}

// send sends b in one datagram.
func (c *conn) send(b []byte) error {
	return unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// recv receives one datagram; with wait unset it returns nil when none is queued.
func (c *conn) recv(wait bool) ([]byte, error) {
	flags := 0
	if !wait {
		flags = unix.MSG_DONTWAIT
	}
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, flags|unix.MSG_TRUNC)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN && !wait:
			return nil, nil
		case err != nil:
			return nil, err
		case n > len(c.buf):
			return nil, fmt.Errorf("nftables: netlink message of %d bytes truncated", n)
		}
		return c.buf[:n], nil
	}
}

// dump sends a dump request of type msg (NFT_MSG_GET*) for family with
// attrs and calls fn with the attributes of each object the kernel lists. A
// dump the kernel marks interrupted (the ruleset changed meanwhile) is
// started again.
func (c *conn) dump(msg int, family byte, attrs []byte, fn func(attrs []byte) error) error {
	for try := 0; ; try++ {
		c.seq++
		seq := c.seq
		if err := c.send(appendMessage(nil, nftType(msg), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, family, attrs)); err != nil {
			return err
		}
		done, intr := false, false
		var cbErr error
		for !done {
			b, err := c.recv(true)
			if err != nil {
				return err
			}
			err = parse(b, func(m nlMessage) error {
				if m.seq != seq {
					return nil
				}
				if m.flags&unix.NLM_F_DUMP_INTR != 0 {
					intr = true
				}
				switch m.typ {
				case unix.NLMSG_DONE:
					done = true
				case unix.NLMSG_ERROR, unix.NLMSG_NOOP:
				default:
					if cbErr == nil && !intr {
						cbErr = fn(m.attrs)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		switch {
		case cbErr != nil:
			return cbErr
		case !intr:
			return nil
		case try == 2:
			return errors.New("nftables: dump interrupted by concurrent changes, three times")
		}
	}
}

// request sends one request of type msg and returns the attributes of the
// first answer of type reply.
func (c *conn) request(msg int, family byte, reply int) ([]byte, error) {
	c.seq++
	seq := c.seq
	if err := c.send(appendMessage(nil, nftType(msg), unix.NLM_F_REQUEST, seq, family, nil)); err != nil {
		return nil, err
	}
	for {
		b, err := c.recv(true)
		if err != nil {
			return nil, err
		}
		var out []byte
		found := false
		err = parse(b, func(m nlMessage) error {
			if m.seq == seq && m.typ == nftType(reply) {
				out, found = m.attrs, true
			}
			return nil
		})
		if err != nil || found {
			return out, err
		}
	}
}

// batch is an nftables transaction being built: the messages between a
// batch begin and a batch end, committed by the kernel all or none. Each
// message is written in place: begin appends its header, its attributes
// follow, and the next begin (or the commit) sets its length.
type batch struct {
	attrs
	seq   uint32
	first uint32
	last  int    // offset of the last message in b
	what  []step // what each message does, by sequence number - first
}

// step says what a message of a batch does, for the error that names it. A
// rule's text is rendered only then: every rule's, every time, was 4% of a
// CNI ADD's instructions.
type step struct {
	text         string // what it does; after the rule, when there is one
	table, chain string
	rule         *Rule
}

// then is s followed by text.
func (s step) then(text string) step {
	s.text += text
	return s
}

func (s step) String() string {
	if s.rule == nil {
		return s.text
	}
	return fmt.Sprintf("table %s chain %s rule %q", s.table, s.chain, s.rule.String()) + s.text
}

func (c *conn) newBatch() *batch {
	c.seq++
	b := &batch{seq: c.seq, first: c.seq + 1, last: -1}
	b.b = appendMessage(make([]byte, 0, 8<<10), unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, b.seq, unix.AF_UNSPEC, nil)
	// The batch header names the subsystem in its resource id.
	binary.BigEndian.PutUint16(b.b[unix.NLMSG_HDRLEN+2:], unix.NFNL_SUBSYS_NFTABLES)
	return b
}

// begin starts a message of type msg with flags (NLM_F_REQUEST is implied);
// its attributes are appended to b next.
func (b *batch) begin(msg int, flags uint16, what step) {
	b.finish()
	b.seq++
	b.last = len(b.b)
	b.b = appendMessage(b.b, nftType(msg), unix.NLM_F_REQUEST|flags, b.seq, unix.NFPROTO_INET, nil)
	b.what = append(b.what, what)
}

// finish sets the length of the message last begun.
func (b *batch) finish() {
	if b.last >= 0 {
		binary.NativeEndian.PutUint32(b.b[b.last:], uint32(len(b.b)-b.last))
	}
}

func (b *batch) empty() bool { return len(b.what) == 0 }

// commit sends the batch in one datagram and returns the kernel's verdict.
// Only the last message asks for an acknowledgement: errors are reported
// for every message regardless, so the batch succeeded when that
// acknowledgement came and no error did.
func (c *conn) commit(b *batch) error {
	if b.empty() {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	b.finish()
	// Set NLM_F_ACK on the last message, then close the batch.
	last := b.b[b.last:]
	binary.NativeEndian.PutUint16(last[6:], binary.NativeEndian.Uint16(last[6:])|unix.NLM_F_ACK)
	ackSeq := b.seq
	b.seq++
	buf := appendMessage(b.b, unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, b.seq, unix.AF_UNSPEC, nil)
	binary.BigEndian.PutUint16(buf[len(buf)-2:], unix.NFNL_SUBSYS_NFTABLES)
	c.seq = b.seq
	if err := c.send(buf); err != nil {
		return err
	}
	var errs []error
	acked := false
	for {
		d, err := c.recv(false)
		if err != nil {
			return err
		}
		if d == nil {
			break
		}
		// parse stops at the first error of a datagram; each error comes in its own.
		err = parse(d, func(m nlMessage) error {
			if m.typ == unix.NLMSG_ERROR && m.seq == ackSeq {
				acked = true
			}
			return nil
		})
		var ke *errKernel
		if errors.As(err, &ke) {
			errs = append(errs, b.describe(ke))
		} else if err != nil {
			return err
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if !acked {
		return errors.New("nftables: the kernel did not acknowledge the batch")
	}
	return nil
}

// describe names the message an error answers.
func (b *batch) describe(e *errKernel) error {
	if i := int(e.seq) - int(b.first); i >= 0 && i < len(b.what) {
		return fmt.Errorf("%s: %w", b.what[i], e)
	}
	return e
}

// decode calls fn with a decoder of b, numbers in network byte order.
func decode(b []byte, fn func(ad *netlink.AttributeDecoder)) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		fn(ad)
	}
	return ad.Err()
}
