package ca

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	pb "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
)

// benchCSRs makes n CSRs for default/app ahead of the timed loop: key
// generation is the workload's cost, not the CA's.
func benchCSRs(b *testing.B, kt pki.KeyType, n int) []string {
	b.Helper()
	csrs := make([]string, n)
	for i := range csrs {
		_, csrs[i] = newCSR(b, kt, appID)
	}
	return csrs
}

func benchCA(b *testing.B, tk *tokenKey) *CA {
	b.Helper()
	cfg := Config{SelfSignedDir: b.TempDir()}
	if tk != nil {
		cfg.Authenticators = []Authenticator{tk.authenticator(b)}
	}
	c, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkSign measures the CA's signing path without the network: parse
// the CSR, verify its signature, check its SAN, issue and PEM-encode.
func BenchmarkSign(b *testing.B) {
	for _, kt := range []pki.KeyType{pki.ECDSAP256, pki.RSA2048} {
		b.Run(kt.String(), func(b *testing.B) {
			c := benchCA(b, nil)
			csrs := benchCSRs(b, kt, 64)
			id := mustID(b, "default", "app")
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := c.Sign([]byte(csrs[i%len(csrs)]), id, time.Hour); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "csr/s")
		})
	}
}

// BenchmarkCreateCertificate measures CreateCertificate over gRPC with TLS
// on loopback, authenticated with an ES256 service-account JWT, with 16
// concurrent callers sharing one connection; the load generator runs on
// the same cores. It reports CSRs per second and the p99 latency.
func BenchmarkCreateCertificate(b *testing.B) {
	for _, kt := range []pki.KeyType{pki.ECDSAP256, pki.RSA2048} {
		b.Run(kt.String(), func(b *testing.B) {
			tk := newTokenKey(b)
			c := benchCA(b, tk)
			cl := client(b, serve(b, c), c.Roots(), nil)
			csrs := benchCSRs(b, kt, 64)
			ctx := withToken(context.Background(), tk.token(b, "default", "app"))
			// Warm the connection.
			if _, err := cl.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csrs[0]}); err != nil {
				b.Fatal(err)
			}
			var (
				mu   sync.Mutex
				lats []time.Duration
			)
			b.SetParallelism(8) // 8 x GOMAXPROCS callers
			b.ResetTimer()
			b.RunParallel(func(p *testing.PB) {
				var mine []time.Duration
				i := 0
				for p.Next() {
					start := time.Now()
					if _, err := cl.CreateCertificate(ctx, &pb.IstioCertificateRequest{Csr: csrs[i%len(csrs)], ValidityDuration: 3600}); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
					i++
				}
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			slices.Sort(lats)
			if len(lats) > 0 {
				b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "csr/s")
		})
	}
}
