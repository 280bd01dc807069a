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
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	s := New(Options{MaxRecvSize: 1 << 10})
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
		c := newConn(s, server, nil)
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
	})
}

// seedStream is a SETTINGS frame, a request's HEADERS and a message, with
// or without the end of the stream.
func seedStream(end bool) []byte {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":path", "/f.S/M"}, {":scheme", "http"}, {"content-type", "application/grpc"}, {"grpc-timeout", "1S"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	fr.WriteData(1, end, []byte{0, 0, 0, 0, 3, 'a', 'b', 'c'})
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
