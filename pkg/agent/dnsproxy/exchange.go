package dnsproxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// udpBufs are receive buffers for upstream answers, as large as a UDP
// datagram can be so nothing is silently cut.
var udpBufs = sync.Pool{New: func() any { b := make([]byte, 65535); return &b }}

// exchange sends packed, the wire form of req, to server over network
// ("udp" or "tcp") and returns the answer whose ID and question match.
// Other datagrams are ignored (late answers, spoofing attempts). ctx bounds
// the whole exchange and interrupts it when cancelled.
func exchange(ctx context.Context, network string, server netip.AddrPort, packed []byte, req *dns.Msg) (*dns.Msg, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, server.String())
	if err != nil {
		return nil, fmt.Errorf("dial %s %s: %w", network, server, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var r *dns.Msg
	if network == "tcp" {
		r, err = exchangeTCP(conn, packed, req)
	} else {
		r, err = exchangeUDP(conn, packed, req)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("exchange with %s over %s: %w", server, network, err)
	}
	return r, nil
}

func exchangeUDP(conn net.Conn, packed []byte, req *dns.Msg) (*dns.Msg, error) {
	if _, err := conn.Write(packed); err != nil {
		return nil, err
	}
	bp := udpBufs.Get().(*[]byte)
	defer udpBufs.Put(bp)
	for {
		n, err := conn.Read(*bp)
		if err != nil {
			return nil, err
		}
		r := new(dns.Msg)
		if r.Unpack((*bp)[:n]) == nil && answers(r, req) {
			return r, nil
		}
	}
}

func exchangeTCP(conn net.Conn, packed []byte, req *dns.Msg) (*dns.Msg, error) {
	frame := make([]byte, 2+len(packed))
	binary.BigEndian.PutUint16(frame, uint16(len(packed)))
	copy(frame[2:], packed)
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(conn, l[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	r := new(dns.Msg)
	if err := r.Unpack(body); err != nil {
		return nil, fmt.Errorf("unpack answer: %w", err)
	}
	if !answers(r, req) {
		return nil, errors.New("answer does not match the query")
	}
	return r, nil
}

// answers reports whether r is a response to req: same ID and question.
// An error response may omit the question.
func answers(r, req *dns.Msg) bool {
	if !r.Response || r.Id != req.Id {
		return false
	}
	if len(r.Question) == 0 {
		return r.Rcode != dns.RcodeSuccess
	}
	a, b := r.Question[0], req.Question[0]
	return len(r.Question) == 1 && a.Qtype == b.Qtype && a.Qclass == b.Qclass && strings.EqualFold(a.Name, b.Name)
}
