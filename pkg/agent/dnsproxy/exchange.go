package dnsproxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// exchangeTCP sends the query packed to server over a new TCP connection
// and returns the answer's wire form if its ID and question match. ctx
// bounds the whole exchange and interrupts it when cancelled. It serves
// the rare retry of a truncated UDP answer, so the connection is not kept.
func exchangeTCP(ctx context.Context, server netip.AddrPort, packed []byte) ([]byte, error) {
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
	r, err := roundTripTCP(conn, packed)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("exchange with %s over tcp: %w", server, err)
	}
	return r, nil
}

func roundTripTCP(conn net.Conn, packed []byte) ([]byte, error) {
	id, question, err := queryKey(packed)
	if err != nil {
		return nil, err
	}
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
	if len(body) < headerLen || !answersQuery(body, id, question) {
		return nil, errors.New("answer does not match the query")
	}
	return body, nil
}
