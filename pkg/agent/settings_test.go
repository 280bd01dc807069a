package agent_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

// These tests run the agent against the real istiod and CA with settings of
// Istio's agent that its templates do not pass but users set (in the
// environment or the mesh's proxyMetadata).

// TestAgentP384Key: ECC_CURVE=P384 with ECDSA gets a workload certificate
// for a P-384 key from the CA.
func TestAgentP384Key(t *testing.T) {
	m := startMesh(t)
	cfg, resolv := podEnv(t, m, "DISABLE_ENVOY=true", "ECC_CURVE=P384")
	runAgent(t, cfg, resolv)
	sec := defaultSecret(t, cfg)
	chain, err := pki.ParseCertificates(sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes())
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := chain[0].PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P384() {
		t.Errorf("workload key %T %v, want ECDSA P-384", chain[0].PublicKey, chain[0].PublicKeyAlgorithm)
	}
}

// TestAgentRootsElsewhere: with XDS_ROOT_CA and CA_ROOT_CA naming a file,
// the agent verifies istiod with it on both connections; nothing is
// mounted at the default path.
func TestAgentRootsElsewhere(t *testing.T) {
	m := startMesh(t)
	cfg, resolv := tlsPodEnv(t, m, m.tlsAddr, "ISTIOD_SAN=localhost", "XDS_ROOT_CA=./etc/mesh/root.pem", "CA_ROOT_CA=./etc/mesh/root.pem")
	os.MkdirAll(cfg.Path("./etc/mesh"), 0o755)
	if err := os.Rename(cfg.Path(config.RootCertPath), cfg.Path("./etc/mesh/root.pem")); err != nil {
		t.Fatal(err)
	}
	runAgent(t, cfg, resolv)
}

// TestGatewayDNSServer: a gateway's agent runs no DNS proxy for
// ISTIO_META_DNS_CAPTURE, but does with ISTIO_META_ENABLE_DNS_SERVER, and
// answers mesh names.
func TestGatewayDNSServer(t *testing.T) {
	m := startMesh(t)
	cfg, resolv := podEnv(t, m, "DISABLE_ENVOY=true", "ISTIO_META_ENABLE_DNS_SERVER=true")
	cfg.Type = "router"
	runAgent(t, cfg, resolv)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion("reviews.default.svc.cluster.local.", dns.TypeA)
	r, _, err := c.Exchange(q, cfg.DNSAddrs[0].String())
	if err != nil || len(r.Answer) == 0 {
		t.Fatalf("DNS at the gateway: %v %v", r, err)
	}
}

// TestAgentOneConnectionToIstiod: when the CA is istiod at the discovery
// address, the agent's CSRs and xDS share one TLS connection; with CA_ADDR
// naming another address, the CA gets its own.
func TestAgentOneConnectionToIstiod(t *testing.T) {
	m := startMesh(t)
	for _, tc := range []struct {
		name  string
		env   func(port string) (addr string, extra []string)
		conns int64
	}{
		{"shared", func(port string) (string, []string) { return "localhost:" + port, nil }, 1},
		{"own", func(port string) (string, []string) {
			// The discovery address by IP, the CA elsewhere by name.
			return "127.0.0.1:" + port, []string{"ISTIOD_SAN=localhost", "CA_ADDR=localhost:" + port}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fwd, accepted := countingProxy(t, m.tlsAddr)
			_, port, _ := net.SplitHostPort(fwd)
			addr, extra := tc.env(port)
			cfg, resolv := tlsPodEnv(t, m, addr, extra...)
			runAgent(t, cfg, resolv)
			if got := accepted.Load(); got != tc.conns {
				t.Errorf("connections to istiod: %d, want %d", got, tc.conns)
			}
		})
	}
}

// countingProxy forwards TCP connections on a loopback port to target and
// counts them; it closes them all when the test ends.
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { io.Copy(up, c); up.Close() })
			wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
	return ln.Addr().String(), &n
}
