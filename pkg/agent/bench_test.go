package agent_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/agent"
)

// BenchmarkStartToReady measures an agent's start until ready (workload
// certificate issued by istiod's CA, first NameTable loaded, connected to
// istiod) against istiod on loopback, without a proxy process.
func BenchmarkStartToReady(b *testing.B) {
	m := startMesh(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg, resolv := podEnv(b, m, "DISABLE_ENVOY=true")
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		done := make(chan error, 1)
		b.StartTimer()
		go func() {
			done <- agent.Run(ctx, cfg, agent.Options{ResolvConf: resolv, ReadinessAddr: "-", Ready: ready, Stdout: io.Discard, Stderr: io.Discard},
				slog.New(slog.DiscardHandler))
		}()
		select {
		case <-ready:
		case err := <-done:
			b.Fatal(err)
		}
		b.StopTimer()
		cancel()
		<-done
		b.StartTimer()
	}
}
