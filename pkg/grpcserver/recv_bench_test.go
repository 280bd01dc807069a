package grpcserver_test

import (
	"context"
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
)

// BenchmarkRecvLarge: grpc-go's client sends 100 KiB requests, about what
// a sidecar that reconnects sends istiod for one type, each on a stream
// of its own, through the windows istiod's ports advertise. writes/op is
// the server's writes to the connection per request (each one system
// call, and on TLS one record or more): its WINDOW_UPDATEs and the answer.
func BenchmarkRecvLarge(b *testing.B) {
	serverTLS, clientTLS := pkitest.MutualTLS(b, spiffeID)
	for _, tc := range []struct {
		name           string
		server, client *tls.Config
		window         int
	}{
		// istiod.NewGRPCServer's windows, which pkg/istiod's
		// TestStreamWindows holds there; literals here, so that this
		// package's tests do not link istiod.
		{"tls", serverTLS, clientTLS, 4 << 10},
		{"plaintext", nil, nil, 16 << 10},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := grpcserver.New(grpcserver.Options{TLS: tc.server, StreamWindow: tc.window})
			s.RegisterService(&sinkDesc, sink{})
			addr, counted := serveCounted(b, s)
			cc := dial(b, addr, tc.client)
			req := wrapperspb.Bytes(make([]byte, 100<<10))
			ctx := context.Background()
			if err := cc.Invoke(ctx, "/skiff.test.Sink/Put", req, new(emptypb.Empty)); err != nil {
				b.Fatal(err) // the connection's set-up, not counted
			}
			before := counted.writes.Load()
			for b.Loop() {
				if err := cc.Invoke(ctx, "/skiff.test.Sink/Put", req, new(emptypb.Empty)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(counted.writes.Load()-before)/float64(b.N), "writes/op")
		})
	}
}

// sink is a test service whose Put takes a message and answers nothing,
// and whose Get answers with as many bytes as asked.
type sink struct{}

var sinkDesc = grpc.ServiceDesc{
	ServiceName: "skiff.test.Sink",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Put",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(wrapperspb.BytesValue)); err != nil {
				return nil, err
			}
			return new(emptypb.Empty), nil
		},
	}, {
		MethodName: "Get",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			n := new(wrapperspb.UInt32Value)
			if err := dec(n); err != nil {
				return nil, err
			}
			return wrapperspb.Bytes(make([]byte, n.GetValue())), nil
		},
	}},
}
