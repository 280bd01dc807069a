package agent_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/agent"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
)

// BenchmarkStartToReady measures an agent's start until ready (workload
// certificate issued by istiod's CA, first NameTable loaded, connected to
// istiod) against istiod on loopback, without a proxy process.
func BenchmarkStartToReady(b *testing.B) {
	m := startMesh(b)
	_, port, _ := net.SplitHostPort(m.tlsAddr)
	for _, bc := range []struct {
		name string
		env  func() (*config.Config, string)
	}{
		{"plaintext", func() (*config.Config, string) { return podEnv(b, m, "DISABLE_ENVOY=true") }},
		// As injected: xDS and the CSR on istiod's TLS port.
		{"TLS", func() (*config.Config, string) { return tlsPodEnv(b, m, "localhost:"+port) }},
	} {
		b.Run(bc.name, func(b *testing.B) { startToReady(b, bc.env) })
	}
}

func startToReady(b *testing.B, env func() (*config.Config, string)) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg, resolv := env()
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
