package tlsrecord_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/tlsrecord"
)

// record returns a record header and a body of n bytes of b.
func record(typ byte, n int, b byte) []byte {
	r := []byte{typ, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(r[3:], uint16(n))
	return append(r, bytes.Repeat([]byte{b}, n)...)
}

// streamConn is a net.Conn reading from a byte stream, at most max bytes
// per read (0: all asked for).
type streamConn struct {
	net.Conn
	r   io.Reader
	max int
}

func (c *streamConn) Read(p []byte) (int, error) {
	if c.max > 0 && len(p) > c.max {
		p = p[:c.max]
	}
	return c.r.Read(p)
}

// boundaries returns the offsets at which the records of stream end.
func boundaries(stream []byte) map[int]bool {
	out := map[int]bool{}
	for off := 0; off+5 <= len(stream); {
		off += 5
		out[off] = true // a header ends
		off += int(binary.BigEndian.Uint16(stream[off-2 : off]))
		out[off] = true
	}
	return out
}

// readAll reads c with buffers of size n, checking that no read crosses a
// record's header or body end, and returns what it read.
func readAll(t *testing.T, c net.Conn, n int, ends map[int]bool, total int) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, n)
	for {
		m, err := c.Read(buf)
		for i := 1; i < m; i++ {
			if ends[len(got)+i] {
				t.Fatalf("read of %d bytes at offset %d crosses the record boundary at %d", m, len(got), len(got)+i)
			}
		}
		got = append(got, buf[:m]...)
		if err == io.EOF || len(got) > total {
			return got
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	}
}

func TestReadsStopAtRecordEnds(t *testing.T) {
	big := record(23, 16384+256, 'b')
	tests := []struct {
		name   string
		stream []byte
		bufLen int // the reader's buffer
		chunk  int // the socket's most bytes per read (0: all)
	}{
		{"one record", record(22, 300, 'h'), 4096, 0},
		{"records in one burst", bytes.Join([][]byte{record(22, 300, 'h'), record(23, 40, 'a'), big, record(21, 2, 'x')}, nil), 64 << 10, 0},
		{"empty bodies", bytes.Join([][]byte{record(23, 0, 0), record(23, 0, 0), record(23, 7, 'a')}, nil), 4096, 0},
		{"headers split across reads", bytes.Join([][]byte{record(23, 10, 'a'), record(23, 3, 'b')}, nil), 4096, 2},
		{"bodies split across reads", bytes.Join([][]byte{big, big}, nil), 64 << 10, 1000},
		{"buffers smaller than a record", bytes.Join([][]byte{big, record(23, 10, 'a')}, nil), 3, 0},
		{"a header cut off", append(record(23, 4, 'a'), 23, 3), 4096, 0},
		{"a body cut off", record(23, 4000, 'a')[:3000], 4096, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tlsrecord.NewConn(&streamConn{r: bytes.NewReader(tt.stream), max: tt.chunk})
			got := readAll(t, c, tt.bufLen, boundaries(tt.stream), len(tt.stream))
			if !bytes.Equal(got, tt.stream) {
				t.Fatalf("read %d bytes, want the %d written, unchanged", len(got), len(tt.stream))
			}
		})
	}
}

func TestSyscallConn(t *testing.T) {
	a, b := tcpPair(t)
	defer b.Close()
	rc, err := tlsrecord.NewConn(a).SyscallConn()
	if err != nil {
		t.Fatalf("SyscallConn of a TCP conn: %v", err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Fatalf("Control: fd %d, %v", fd, err)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if _, err := tlsrecord.NewConn(p1).SyscallConn(); err == nil {
		t.Fatal("SyscallConn of a net.Pipe: no error")
	}
}

// tcpPair returns both ends of a loopback TCP connection, closed with t.
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := lis.Accept()
		acc <- c
	}()
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s, c
}

func FuzzConn(f *testing.F) {
	f.Add(record(22, 300, 'h'), uint16(4096), uint16(0))
	f.Add(append(record(23, 0, 0), record(23, 9, 'a')...), uint16(7), uint16(3))
	f.Add([]byte{23, 3, 3, 255, 255, 1}, uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, stream []byte, bufLen, chunk uint16) {
		c := tlsrecord.NewConn(&streamConn{r: bytes.NewReader(stream), max: int(chunk)})
		got := readAll(t, c, int(bufLen)%(20<<10)+1, boundaries(stream), len(stream))
		if !bytes.Equal(got, stream) {
			t.Fatalf("read %q, want %q", got, stream)
		}
	})
}
