package grpcwire

import (
	"encoding/binary"
	"io"
)

// headerLen is the size of the prefix before every message: a compressed
// flag byte and the message's length as a big-endian uint32.
const headerLen = 5

// defaultMaxRecvSize bounds a received message when no limit is set.
const defaultMaxRecvSize = 256 << 20

// putHeader fills hdr with the prefix of an uncompressed message of n bytes.
func putHeader(hdr *[headerLen]byte, n int) {
	hdr[0] = 0
	binary.BigEndian.PutUint32(hdr[1:], uint32(n))
}

// readFrame reads one length-prefixed message from r into a buffer of
// exactly its size, using hdr as scratch space for the prefix. It returns
// io.EOF when r ends cleanly between messages, a *Status for a frame this
// package will not accept (compressed, larger than max, truncated), and r's
// own error otherwise, for the caller to map.
func readFrame(r io.Reader, hdr *[headerLen]byte, max int) ([]byte, error) {
	if n, err := readFull(r, hdr[:]); err != nil {
		if err == io.EOF && n > 0 {
			return nil, Errorf(Internal, "grpcwire: stream ended inside a message prefix")
		}
		return nil, err
	}
	switch hdr[0] {
	case 0:
	case 1:
		return nil, Errorf(Internal, "grpcwire: received a compressed message, but no compression was negotiated")
	default:
		return nil, Errorf(Internal, "grpcwire: malformed message prefix: flag %d", hdr[0])
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if uint64(n) > uint64(max) {
		return nil, Errorf(ResourceExhausted, "grpcwire: received message larger than max (%d vs. %d)", n, max)
	}
	// The buffer grows as the message arrives (doubling from 1 MiB), so a
	// prefix that claims a large message reserves no more memory than the
	// bytes that really came.
	msg := make([]byte, min(int(n), firstChunk))
	for read := 0; ; {
		if _, err := readFull(r, msg[read:]); err != nil {
			if err == io.EOF {
				return nil, Errorf(Internal, "grpcwire: stream ended inside a message of %d bytes", n)
			}
			return nil, err
		}
		if read = len(msg); read == int(n) {
			return msg, nil
		}
		msg = append(msg, make([]byte, min(int(n), 2*read)-read)...)
	}
}

// firstChunk is the most a message's buffer starts with.
const firstChunk = 1 << 20

// readFull is io.ReadFull, except that it returns r's errors as they are:
// io.EOF means r ended cleanly (after n bytes), and an io.ErrUnexpectedEOF
// is r's own, as net/http reports a lost connection.
func readFull(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			if err == io.EOF && n == len(b) {
				break
			}
			return n, err
		}
	}
	return n, nil
}

// frameWriter writes length-prefixed messages, reusing one prefix buffer.
// The message itself is written as given, never copied here.
type frameWriter struct {
	hdr [headerLen]byte
}

func (f *frameWriter) write(w io.Writer, msg []byte) error {
	if uint64(len(msg)) > 1<<32-1 {
		return Errorf(ResourceExhausted, "grpcwire: message of %d bytes is too large to frame", len(msg))
	}
	putHeader(&f.hdr, len(msg))
	if _, err := w.Write(f.hdr[:]); err != nil {
		return err
	}
	if len(msg) == 0 {
		return nil
	}
	_, err := w.Write(msg)
	return err
}
