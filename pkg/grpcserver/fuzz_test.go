package grpcserver

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// FuzzFrames feeds a connection the client preface and then arbitrary
// bytes: whatever they are, the connection ends without a panic or a
// goroutine left behind once the client closes.
func FuzzFrames(f *testing.F) {
	f.Add(seedStream(false))
	f.Add(seedStream(true))
	// Messages over the window, more than the budget holds at once.
	f.Add(seedStreams(false, make([]byte, 1500), make([]byte, 1500), make([]byte, 3000)))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	// Messages over the 1 KiB window go through a receive budget of two.
	s := New(Options{MaxRecvSize: 8 << 10, StreamWindow: 1 << 10, RecvBudget: 2 << 10})
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "f.S", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "M", ClientStreams: true, ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			for {
				var b []byte
				if err := ss.RecvMsg(&b); err != nil {
					return err
				}
			}
		}}},
	}, nil)
	s.codec = rawCodec{}
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		sock := &corkConn{Conn: server}
		c := newConn(s, sock, sock, nil)
		if !s.track(c, 1) {
			t.Fatal("server stopped")
		}
		done := make(chan struct{})
		go func() { c.serve(); close(done) }()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(time.Second))
		client.Write([]byte(http2.ClientPreface))
		client.Write(in)
		client.Close()
		<-done
		s.wg.Wait() // the handlers too
		if free, waiting := s.Admission(); free != s.adm.budget || waiting != 0 {
			t.Fatalf("after the connection: %d of the receive budget free, %d waiting", free, waiting)
		}
	})
}

// seedStream is a SETTINGS frame, a request's HEADERS and a message, with
// or without the end of the stream.
func seedStream(end bool) []byte {
	return seedStreams(end, []byte("abc"))
}

// seedStreams is a SETTINGS frame and a stream per message: HEADERS and
// the message, with or without the end of the stream.
func seedStreams(end bool, msgs ...[]byte) []byte {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":path", "/f.S/M"}, {":scheme", "http"}, {"content-type", "application/grpc"}, {"grpc-timeout", "1S"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	for i, m := range msgs {
		id := uint32(2*i + 1)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		n := len(m)
		fr.WriteData(id, end, append([]byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, m...))
	}
	return b.Bytes()
}

// rawCodec passes bytes through.
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }
func (rawCodec) Marshal(v any) (data mem.BufferSlice, err error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
