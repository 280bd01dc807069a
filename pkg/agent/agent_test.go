package agent_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/agent"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// token is the service-account token istiod's CA accepts in these tests.
const token = "agent-test-token"

// tokenAuth accepts token as the identity of one service account.
type tokenAuth struct{ id spiffe.ID }

func (a tokenAuth) Name() string { return "test-token" }

func (a tokenAuth) Authenticate(ctx context.Context) (spiffe.ID, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if strings.TrimPrefix(v, "Bearer ") == token {
			return a.id, nil
		}
		return spiffe.ID{}, errors.New("unknown token")
	}
	return spiffe.ID{}, fmt.Errorf("%w: no bearer token", ca.ErrNoCredential)
}

// mesh is istiod on the sample mesh, with its CA (file mode, self-signed
// root, token for default/productpage) on the same plaintext port, and on
// the TLS port (which requires a client identity). These tests run the
// agent against the real istiod; the agent's unit tests use agenttest.
type mesh struct {
	addr, tlsAddr string
	ca            *ca.CA
}

func startMesh(t testing.TB) *mesh {
	t.Helper()
	id, err := spiffe.New("cluster.local", "default", "productpage")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // after istiod's own cleanup: the CA outlives it
	authority, err := ca.New(ctx, ca.Config{SelfSignedDir: t.TempDir(), Authenticators: []ca.Authenticator{tokenAuth{id}}, ServingDNSNames: []string{"localhost"}},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := istiodtest.StartWith(t, func(c *istiod.Config) { c.DebugAddr, c.DebounceAfter = "", 10*time.Millisecond },
		slog.New(slog.DiscardHandler), istiod.WithGRPC(authority.Register),
		istiod.WithSecureGRPC("127.0.0.1:0", authority.ServerTLSConfig(), istiod.RequireIdentity(authority, slog.New(slog.DiscardHandler))))
	return &mesh{addr: d.Addr("grpc"), tlsAddr: d.Addr("grpc-tls"), ca: authority}
}

// podEnv is the environment the injector gives a sidecar, in a work dir.
func podEnv(t testing.TB, m *mesh, extra ...string) (*config.Config, string) {
	t.Helper()
	work := t.TempDir()
	tok := filepath.Join(work, config.TokenPath)
	os.MkdirAll(filepath.Dir(tok), 0o755)
	os.WriteFile(tok, []byte(token), 0o600)
	resolv := filepath.Join(work, "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver 127.0.0.1\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n"), 0o644)
	env := append([]string{
		"POD_NAME=productpage-0", "POD_NAMESPACE=default", "INSTANCE_IP=127.0.0.31", "SERVICE_ACCOUNT=productpage",
		fmt.Sprintf("PROXY_CONFIG={\"discoveryAddress\": %q, \"controlPlaneAuthPolicy\": \"NONE\", \"statusPort\": %d}", m.addr, freePort(t)),
		"ISTIO_META_DNS_CAPTURE=true", fmt.Sprintf("DNS_PROXY_ADDR=127.0.0.1:%d", freePort(t)), "ECC_SIGNATURE_ALGORITHM=ECDSA",
		"ISTIO_META_APP_CONTAINERS=productpage",
	}, extra...)
	cfg, err := config.Load(env, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = work
	return cfg, resolv
}

// runAgent runs the agent until the test ends and waits until it is ready.
func runAgent(t testing.TB, cfg *config.Config, resolv string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, cfg, agent.Options{ResolvConf: resolv, ReadinessAddr: "-", Ready: ready, Stdout: io.Discard, Stderr: io.Discard},
			slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("agent stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("agent not ready after 20 s")
	}
}

// TestAgentAgainstIstiod: a proxy-less agent (DISABLE_ENVOY) against the real
// istiod and CA gets its certificate and NameTable, serves SDS and xDS on
// its sockets, answers mesh names, and reports ready on the status port.
func TestAgentAgainstIstiod(t *testing.T) {
	m := startMesh(t)
	cfg, resolv := podEnv(t, m, "DISABLE_ENVOY=true")
	runAgent(t, cfg, resolv)

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz/ready", cfg.Proxy.StatusPort))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz/ready: %v %v", resp, err)
	}
	resp.Body.Close()

	// SDS on the Unix socket.
	if sec := defaultSecret(t, cfg); sec.GetTlsCertificate() == nil {
		t.Fatalf("default secret: %v", sec)
	}

	// xDS through the agent's socket.
	xds := dialUnix(t, cfg.Path(config.XDSSocket))
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(xds).StreamAggregatedResources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	node := "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local"
	stream.Send(&discovery.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Node: nodeOf(node)})
	cds, err := stream.Recv()
	if err != nil || len(cds.Resources) == 0 {
		t.Fatalf("CDS through the agent: %v %v", cds, err)
	}

	// The DNS proxy answers a mesh name from the NameTable.
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion("reviews.default.svc.cluster.local.", dns.TypeA)
	r, _, err := c.Exchange(q, cfg.DNSAddrs[0].String())
	if err != nil || len(r.Answer) == 0 {
		t.Fatalf("DNS: %v %v", r, err)
	}
	if !strings.Contains(r.Answer[0].String(), "\tA\t") {
		t.Errorf("answer %s", r.Answer[0])
	}

	// SRV for a mesh service, with its port from istiod's clusters.
	srvq := new(dns.Msg)
	srvq.SetQuestion("_9080._tcp.reviews.default.svc.cluster.local.", dns.TypeSRV)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, _, err := c.Exchange(srvq, cfg.DNSAddrs[0].String())
		if err == nil && len(r.Answer) > 0 {
			if srv, ok := r.Answer[0].(*dns.SRV); !ok || srv.Port != 9080 || srv.Target != "reviews.default.svc.cluster.local." {
				t.Errorf("SRV answer %v", r.Answer[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SRV answer for reviews: %v %v", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The private key is never written to disk without OUTPUT_CERTS.
	filepath.WalkDir(cfg.WorkDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), "PRIVATE KEY") {
				t.Errorf("private key written to %s", path)
			}
		}
		return nil
	})
}

// TestAgentSupervisesTheProxy runs a stand-in proxy: the agent writes its
// bootstrap, starts it with Envoy's flags, is ready when its admin API is,
// merges its metrics, and drains it when stopped.
func TestAgentSupervisesTheProxy(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "envoy")
	if out, err := exec.Command("go", "build", "-o", bin, "./envoy/testdata/fakeproxy").CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	m := startMesh(t)
	admin := freePort(t)
	events := filepath.Join(t.TempDir(), "events")
	t.Setenv("FAKEPROXY_LOG", events)
	t.Setenv("FAKEPROXY_ADMIN_PORT", fmt.Sprint(admin))
	cfg, resolv := podEnv(t, m)
	cfg.Proxy.BinaryPath, cfg.Proxy.ProxyAdminPort = bin, int32(admin)
	cfg.Proxy.TerminationDrainDuration = 100 * time.Millisecond
	t.Cleanup(func() { // runs after the agent has stopped
		ev, _ := os.ReadFile(events)
		if !strings.Contains(string(ev), "drain POST inboundonly&graceful") || !strings.Contains(string(ev), "signal terminated") {
			t.Errorf("proxy not drained and stopped:\n%s", ev)
		}
	})
	runAgent(t, cfg, resolv)

	b, err := os.ReadFile(filepath.Join(cfg.WorkDir, "etc/istio/proxy/envoy-rev.json"))
	if err != nil || !strings.Contains(string(b), "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local") {
		t.Errorf("bootstrap: %v", err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", cfg.Proxy.StatusPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "envoy_server_live 1") || !strings.Contains(string(body), "dns_requests_total") {
		t.Errorf("merged metrics lack the proxy's or the agent's:\n%s", body)
	}
}

func dialUnix(t testing.TB, path string) *grpc.ClientConn {
	abs, _ := filepath.Abs(path)
	c, err := grpc.NewClient("unix://"+abs, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestAgentOverMutualTLS: the agent reaches istiod on the TLS port, verifying
// istiod against the mesh root, with its token for the first certificate,
// and xDS is accepted because it proves an identity; a client that proves
// none is refused.
func TestAgentOverMutualTLS(t *testing.T) {
	m := startMesh(t)
	_, port, _ := net.SplitHostPort(m.tlsAddr)
	cfg, resolv := tlsPodEnv(t, m, "localhost:"+port)
	runAgent(t, cfg, resolv)

	// Without a certificate or a token, xDS on the TLS port is refused.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.ca.RootCertPEM())
	conn, err := grpc.NewClient("localhost:"+port, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(context.Background())
	if err == nil {
		s.Send(&discovery.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Node: nodeOf("sidecar~127.0.0.31~x.default~default.svc.cluster.local")})
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("anonymous xDS on the TLS port: %v, want Unauthenticated", err)
	}
}

// TestAgentDialsIstiodByIP: with the discovery address an IP, which
// istiod's certificate does not name, ISTIOD_SAN gives the name to verify,
// for xDS and the CA alike (a VM's set-up in Istio).
func TestAgentDialsIstiodByIP(t *testing.T) {
	m := startMesh(t)
	cfg, resolv := tlsPodEnv(t, m, m.tlsAddr, "ISTIOD_SAN=localhost")
	runAgent(t, cfg, resolv)
}

// defaultSecret fetches the workload's "default" secret from the agent's
// SDS socket.
func defaultSecret(t *testing.T, cfg *config.Config) *tlsv3.Secret {
	t.Helper()
	sds := dialUnix(t, cfg.Path(config.SDSSocket))
	resp, err := secretv3.NewSecretDiscoveryServiceClient(sds).FetchSecrets(context.Background(),
		&discovery.DiscoveryRequest{ResourceNames: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	var sec tlsv3.Secret
	if err := resp.Resources[0].UnmarshalTo(&sec); err != nil {
		t.Fatalf("default secret: %v", err)
	}
	return &sec
}

// tlsPodEnv is podEnv for a proxy-less agent on istiod's TLS port at addr,
// with the mesh root where the injector mounts it.
func tlsPodEnv(t testing.TB, m *mesh, addr string, extra ...string) (*config.Config, string) {
	t.Helper()
	cfg, resolv := podEnv(t, m, append([]string{"DISABLE_ENVOY=true",
		fmt.Sprintf("PROXY_CONFIG={\"discoveryAddress\": %q, \"controlPlaneAuthPolicy\": \"MUTUAL_TLS\", \"statusPort\": %d}", addr, freePort(t))}, extra...)...)
	root := cfg.Path(cfg.RootCertPath)
	os.MkdirAll(filepath.Dir(root), 0o755)
	if err := os.WriteFile(root, m.ca.RootCertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg.Plaintext {
		t.Fatal("MUTUAL_TLS parsed as plaintext")
	}
	return cfg, resolv
}

// TestGRPCAgentTemplate starts the agent with the environment of Istio's
// grpc-agent template (no Envoy, no DNS capture, OUTPUT_CERTS, no
// GRPC_XDS_BOOTSTRAP on istio-proxy): it writes the bootstrap at Istio's
// default path and is ready before any app has opened xDS, as Istio's
// agent is (the template's postStart "pilot-agent wait" depends on it).
func TestGRPCAgentTemplate(t *testing.T) {
	m := startMesh(t)
	cfg, resolv := podEnv(t, m, "DISABLE_ENVOY=true", "ISTIO_META_DNS_CAPTURE=false", "ISTIO_META_GENERATOR=grpc",
		"OUTPUT_CERTS=./var/lib/istio/data")
	runAgent(t, cfg, resolv)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz/ready", cfg.Proxy.StatusPort))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz/ready with no app connected: %v %v", resp, err)
	}
	resp.Body.Close()
	b, err := os.ReadFile(filepath.Join(cfg.WorkDir, "etc/istio/proxy/grpc-bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(cfg.WorkDir, "var/lib/istio/data/cert-chain.pem"), "xds.istio.io/grpc/lds/inbound/%s"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("bootstrap lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.WorkDir, "var/lib/istio/data/cert-chain.pem")); err != nil {
		t.Errorf("certificate not written out: %v", err)
	}
}
