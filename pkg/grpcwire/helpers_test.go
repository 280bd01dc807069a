package grpcwire_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rawCodec passes messages through grpc-go as they are, so grpc-go peers
// exchange the same opaque bytes grpcwire does.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// wait fails the test unless ch delivers within a generous bound; it waits
// on the event, the bound only keeps a broken test from hanging.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// socketPath returns a Unix socket path short enough for sun_path.
func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

func listen(t *testing.T, network string) net.Listener {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = socketPath(t)
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// goServer serves h, grpc-go's handler for every method, on ln until the
// test ends. creds nil means plaintext.
func goServer(t *testing.T, ln net.Listener, creds credentials.TransportCredentials, h grpc.StreamHandler) *grpc.Server {
	t.Helper()
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(h),
		grpc.MaxRecvMsgSize(64 << 20),
		grpc.MaxSendMsgSize(64 << 20),
	}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	g := grpc.NewServer(opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(ln)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return g
}

// goClient is a grpc-go client of a grpcwire server on a Unix socket.
func goClient(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// echo is a grpc-go handler that sends back every message it receives and
// ends with OK at the client's half-close.
func echo(_ any, ss grpc.ServerStream) error {
	for {
		var msg []byte
		if err := ss.RecvMsg(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&msg); err != nil {
			return err
		}
	}
}

// bigMessage returns n bytes of a pattern that shows misordered chunks.
func bigMessage(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>10)
	}
	return b
}

func dialTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
