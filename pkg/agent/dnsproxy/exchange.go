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
	"time"

	"github.com/miekg/dns"
)

// exchangeTCP sends packed, the wire form of req, to server over a new TCP
// connection and returns the answer if its ID and question match. ctx
// bounds the whole exchange and interrupts it when cancelled. It serves
// the rare retry of a truncated UDP answer, so the connection is not kept.
func exchangeTCP(ctx context.Context, server netip.AddrPort, packed []byte, req *dns.Msg) (*dns.Msg, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", server.String())
	if err != nil {
		return nil, fmt.Errorf("dial tcp %s: %w", server, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r, err := roundTripTCP(conn, packed, req)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("exchange with %s over tcp: %w", server, err)
	}
	return r, nil
}

func roundTripTCP(conn net.Conn, packed []byte, req *dns.Msg) (*dns.Msg, error) {
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
