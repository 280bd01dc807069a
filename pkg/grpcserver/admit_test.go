package grpcserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// gateService's Take handler takes one message, and only once the test
// sends on its gate (or the stream ends), then echoes it back.
type gateService struct{ gate chan struct{} }

type gateHandler interface{ gated() chan struct{} }

func (g *gateService) gated() chan struct{} { return g.gate }

var gateDesc = grpc.ServiceDesc{
	ServiceName: "skiff.test.Gate",
	HandlerType: (*gateHandler)(nil),
	Streams: []grpc.StreamDesc{{StreamName: "Take", ServerStreams: true, ClientStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			select {
			case <-srv.(gateHandler).gated():
			case <-ss.Context().Done():
				return status.FromContextError(ss.Context().Err()).Err()
			}
			in := new(wrapperspb.BytesValue)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			return ss.SendMsg(in)
		}}},
}

var takeDesc = &grpc.StreamDesc{StreamName: "Take", ServerStreams: true, ClientStreams: true}

// TestRecvBudget: eight sidecars each send a message of 40 kB on a 4 KiB
// window to handlers that do not take them yet. The server holds the three
// its budget has room for; the others wait, their windows withheld. One of
// them gives up while it waits and leaves the line. Once the handlers take
// their messages, each taken message lets the next stream in: every
// message arrives whole and the budget is whole again.
func TestRecvBudget(t *testing.T) {
	const payload = 40000
	size := proto.Size(wrapperspb.Bytes(make([]byte, payload)))
	budget := 3*size + 100
	serverTLS, clientTLS := pkitest.MutualTLS(t, spiffeID)
	s := grpcserver.New(grpcserver.Options{TLS: serverTLS, StreamWindow: 4096, RecvBudget: budget})
	g := &gateService{gate: make(chan struct{})}
	s.RegisterService(&gateDesc, g)
	addr := serve(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), polltest.Timeout)
	defer cancel()

	type sidecar struct {
		cs     grpc.ClientStream
		cancel context.CancelFunc
		want   []byte
	}
	var sidecars []sidecar
	for i := range 8 {
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		cs, err := dial(t, addr, clientTLS).NewStream(sctx, takeDesc, "/skiff.test.Gate/Take")
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte{byte(i + 1)}, payload)
		if err := cs.SendMsg(wrapperspb.Bytes(want)); err != nil {
			t.Fatal(err)
		}
		sidecars = append(sidecars, sidecar{cs, scancel, want})
		// One at a time, so that the first three are the ones let in.
		held, waiting := min(i+1, 3), max(i+1-3, 0)
		polltest.Until(t, fmt.Sprintf("%d messages held and %d streams waiting", held, waiting), func() bool {
			free, w := s.Admission()
			return free == budget-held*size && w == waiting
		})
	}

	sidecars[5].cancel()
	polltest.Until(t, "the cancelled stream out of the line", func() bool {
		_, w := s.Admission()
		return w == 4
	})
	if _, err := sidecars[5].cs.Header(); status.Code(err) != codes.Canceled && err != nil {
		t.Fatalf("cancelled stream: %v", err)
	}

	close(g.gate)
	for i, sc := range sidecars {
		if i == 5 {
			continue
		}
		got := new(wrapperspb.BytesValue)
		if err := sc.cs.RecvMsg(got); err != nil {
			t.Fatalf("sidecar %d: %v", i, err)
		}
		if !bytes.Equal(got.GetValue(), sc.want) {
			t.Fatalf("sidecar %d: %d bytes back, want its %d", i, len(got.GetValue()), payload)
		}
		if err := sc.cs.RecvMsg(got); !errors.Is(err, io.EOF) {
			t.Fatalf("sidecar %d after its answer: %v", i, err)
		}
	}
	polltest.Until(t, "the whole budget back", func() bool {
		free, w := s.Admission()
		return free == budget && w == 0
	})
}

// TestRecvBudgetOverrun: a client that sends more of a waiting message
// than its window allows gets its stream reset with FLOW_CONTROL_ERROR,
// and gives its place in line back.
func TestRecvBudgetOverrun(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{StreamWindow: 4096, RecvBudget: 12 << 10})
	s.RegisterService(&gateDesc, &gateService{gate: make(chan struct{})})
	c := rawDial(t, serve(t, s))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/skiff.test.Gate/Take"}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	// Literals only: the same block serves every stream.
	message := func(id uint32, size int) {
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		msg := append([]byte{0, byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}, make([]byte, size)...)
		for len(msg) > 0 { // all of it, whatever the window
			n := min(len(msg), 16384)
			if err := c.fr.WriteData(id, false, msg[:n]); err != nil {
				t.Fatal(err)
			}
			msg = msg[n:]
		}
	}
	message(1, 8<<10) // let in, and held: its handler waits
	polltest.Until(t, "the first message held", func() bool { free, _ := s.Admission(); return free == 4<<10 })
	message(3, 8<<10) // no room: it must wait with 4 KiB at most
	rst := c.until(func(f http2.Frame) bool { r, ok := f.(*http2.RSTStreamFrame); return ok && r.StreamID == 3 }).(*http2.RSTStreamFrame)
	if rst.ErrCode != http2.ErrCodeFlowControl {
		t.Fatalf("RST_STREAM %v, want FLOW_CONTROL_ERROR", rst.ErrCode)
	}
	polltest.Until(t, "the line empty", func() bool { _, w := s.Admission(); return w == 0 })
}
