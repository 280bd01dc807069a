package grpcserver_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
)

// BenchmarkSendLarge: istiod answers grpc-go's client, with Envoy's large
// windows, with 336 KiB: a sidecar's routes for 1000 services, which every
// full push and VirtualService change sends each sidecar. writes/op is the
// server's writes to the connection per answer.
func BenchmarkSendLarge(b *testing.B) {
	for _, tc := range ports(b) {
		b.Run(tc.name, func(b *testing.B) {
			s := grpcserver.New(grpcserver.Options{TLS: tc.server})
			s.RegisterService(&sinkDesc, sink{})
			addr, counted := serveCounted(b, s)
			cc := dial(b, addr, tc.client, envoyWindows...)
			req, resp := wrapperspb.UInt32(336<<10), new(wrapperspb.BytesValue)
			ctx := context.Background()
			if err := cc.Invoke(ctx, "/skiff.test.Sink/Get", req, resp); err != nil {
				b.Fatal(err) // the connection's set-up, not counted
			}
			before := counted.writes.Load()
			b.SetBytes(336 << 10)
			for b.Loop() {
				if err := cc.Invoke(ctx, "/skiff.test.Sink/Get", req, resp); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(counted.writes.Load()-before)/float64(b.N), "writes/op")
		})
	}
}
