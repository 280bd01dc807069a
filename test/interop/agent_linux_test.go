package interop

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/skiff-mesh/skiff/pkg/agent/bootstrap"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// leafURI verifies a PEM chain (leaf first) against the pod's root
// certificate, the control plane's istio-ca-root-cert, and returns the
// leaf's one URI SAN.
func leafURI(t *testing.T, p *pod, chain []byte) string {
	t.Helper()
	var certs []*x509.Certificate
	for rest := chain; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatalf("no certificate in %q", chain)
	}
	rootPEM, err := os.ReadFile(filepath.Join(p.root, "var/run/secrets/istio/root-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatal("no root certificate")
	}
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("leaf does not verify against the control plane's root: %v", err)
	}
	if len(certs[0].URIs) != 1 {
		t.Fatalf("leaf has URI SANs %v, want one", certs[0].URIs)
	}
	return certs[0].URIs[0].String()
}

// TestIstioAgentUnderSkiffIstiod runs Istio's pilot-agent, as Istio's
// kube-inject sets it up, under Skiff's istiod on a real API server: the
// agent's SDS serves a certificate for its SPIFFE identity from Skiff's CA,
// and its DNS proxy answers a mesh name from Skiff's NameTable (SRV it
// forwards upstream); a proxyless grpc-go client configured through the
// agent's XDS socket calls the Service's backend; Istio's istioctl
// proxy-status lists the pod SYNCED. There is no
// Envoy on these machines: a stand-in that only waits takes its place
// (with DISABLE_ENVOY Istio's agent serves no SDS), started from the
// bootstrap template Istio's proxyv2 image ships.
func TestIstioAgentUnderSkiffIstiod(t *testing.T) {
	netnstest.RequireRoot(t)
	agent := istiobin.Path(t, istiobin.PilotAgent)
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	env, ctx := startPodEnv(t)
	namespace := netnstest.UniqueName("interop-")
	meshObjects(t, ctx, env, namespace)
	secure, plain := freeAddr(t), freeAddr(t)
	// Debug auth off: Istio's istioctl reads syncz on the plaintext port.
	startProcess(t, t.TempDir(), []string{"ENABLE_DEBUG_ENDPOINT_AUTH=false"}, istiod, "--kubeconfig", env.Kubeconfig,
		"--grpcAddr", plain, "--secureGRPCAddr", secure, "--httpAddr", freeAddr(t),
		"--monitoringAddr", "", "--httpsAddr", freeAddr(t))
	listening(t, secure)

	p := newPod(t, ctx, env, namespace, secure)
	bootstrap := filepath.Join(p.root, "etc/istio/proxy/grpc-bootstrap.json")
	// No Envoy on these machines: a stand-in that just waits, so the agent
	// runs as a sidecar's would (SDS served) rather than proxyless.
	envoy := filepath.Join(p.root, "usr/local/bin/envoy")
	write(t, envoy, "#!/bin/sh\nexec sleep 600\n")
	if err := os.Chmod(envoy, 0o755); err != nil {
		t.Fatal(err)
	}
	// The bootstrap template Istio's proxyv2 image ships.
	tmpl, err := os.ReadFile(filepath.Join(istiobin.ModuleDir(t), "tools/packaging/common/envoy_bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(p.root, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"), string(tmpl))
	serveReviews(t, ctx, env, p)
	upstream := startUpstreamDNS(t, p)
	p.start(t, agent, `PROXY_CONFIG={"binaryPath": "`+envoy+`"}`, "ISTIO_META_DNS_CAPTURE=true",
		"GRPC_XDS_BOOTSTRAP="+bootstrap)
	t.Run("Envoy's xDS flavour as Skiff's agent picks it", func(t *testing.T) { sameADSType(t, p) })
	t.Run("certificate through SDS", func(t *testing.T) {
		chain := sdsChain(t, p)
		if got, want := leafURI(t, p, chain), "spiffe://cluster.local/ns/"+namespace+"/sa/app"; got != want {
			t.Errorf("identity %s, want %s", got, want)
		}
	})

	// The proxyless client; its stream through the agent also makes
	// Istio's agent fetch the NameTable.
	cc := agentClient(t, p, bootstrap, "xds:///reviews."+namespace+".svc.cluster.local:9080")
	t.Run("dns", func(t *testing.T) {
		name := "reviews." + namespace + ".svc.cluster.local"
		polltest.Within(t, 30*time.Second, "DNS proxy answers "+name, func() bool {
			return slices.Contains(p.lookup(t, name), "10.0.0.50")
		})
	})
	t.Run("dns srv", func(t *testing.T) { istioAgentSRV(t, p, upstream) })
	t.Run("dns wire", func(t *testing.T) { dnsWire(t, p, true) })
	t.Run("proxyless grpc", func(t *testing.T) { proxylessCall(t, cc) })
	t.Run("istioctl proxy-status", func(t *testing.T) { proxyStatusSynced(t, plain, p) })
}

// sdsChain asks the agent's SDS socket for the "default" secret, as Envoy
// would, and returns its certificate chain (PEM).
func sdsChain(t *testing.T, p *pod) []byte {
	t.Helper()
	socket := filepath.Join(p.root, "var/run/secrets/workload-spiffe-uds/socket")
	polltest.Within(t, 30*time.Second, "SDS socket "+socket, func() bool {
		_, err := os.Stat(socket)
		return err == nil
	})
	cc, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := secretv3.NewSecretDiscoveryServiceClient(cc).StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{
		Node:          &corev3.Node{Id: "sidecar~" + podIP + "~" + p.name + "." + p.namespace + "~" + p.namespace + ".svc.cluster.local"},
		TypeUrl:       "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
		ResourceNames: []string{"default"},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("SDS: %v", err)
	}
	for _, r := range resp.GetResources() {
		var s tlsv3.Secret
		if err := r.UnmarshalTo(&s); err != nil {
			t.Fatal(err)
		}
		if s.GetName() == "default" {
			return s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()
		}
	}
	t.Fatalf("SDS answered no default secret: %v", resp)
	return nil
}

// TestSkiffAgentUnderIstioPilotDiscovery runs Skiff's pilot-agent, set up
// as Istio's kube-inject sets up istio-proxy, under Istio 1.31's own
// pilot-discovery on a real API server: a certificate for the pod's
// SPIFFE identity from Istio's CA, served by the agent's SDS; the
// agent's DNS proxy answering a Service (A and SRV) from Istio's
// NameTable; a proxyless grpc-go client configured through the agent's
// XDS socket calling the Service's backend; Istio's istioctl proxy-status
// listing the pod SYNCED.
func TestSkiffAgentUnderIstioPilotDiscovery(t *testing.T) {
	netnstest.RequireRoot(t)
	agent := skiff(t, "pilot-agent")
	env, ctx := startPodEnv(t)
	namespace := netnstest.UniqueName("interop-")
	meshObjects(t, ctx, env, namespace)
	secure, plain := startIstioPilot(t, env)

	p := newPod(t, ctx, env, namespace, secure)
	bootstrap := filepath.Join(p.root, "etc/istio/proxy/grpc-bootstrap.json")
	serveReviews(t, ctx, env, p)
	upstream := startUpstreamDNS(t, p)
	p.start(t, agent, "DISABLE_ENVOY=true", "ISTIO_META_DNS_CAPTURE=true", "GRPC_XDS_BOOTSTRAP="+bootstrap)

	t.Run("certificate through SDS", func(t *testing.T) {
		chain := sdsChain(t, p)
		if got, want := leafURI(t, p, chain), "spiffe://cluster.local/ns/"+namespace+"/sa/app"; got != want {
			t.Errorf("identity %s, want %s", got, want)
		}
	})
	t.Run("dns", func(t *testing.T) {
		name := "reviews." + namespace + ".svc.cluster.local"
		polltest.Within(t, 30*time.Second, "DNS proxy answers "+name, func() bool {
			return slices.Contains(p.lookup(t, name), "10.0.0.50")
		})
	})
	t.Run("dns srv", func(t *testing.T) { skiffAgentSRV(t, p, upstream) })
	t.Run("dns wire", func(t *testing.T) { dnsWire(t, p, false) })
	// Open for the rest of the test, so proxy-status lists its stream.
	cc := agentClient(t, p, bootstrap, "xds:///reviews."+namespace+".svc.cluster.local:9080")
	t.Run("proxyless grpc", func(t *testing.T) { proxylessCall(t, cc) })
	t.Run("istioctl proxy-status", func(t *testing.T) { proxyStatusSynced(t, plain, p) })
}

// startIstioPilot runs Istio's pilot-discovery on env's API server, as
// istiod's chart does, and returns its secure and plaintext xDS addresses.
func startIstioPilot(t *testing.T, env *kubetest.Env) (secure, plain string) {
	t.Helper()
	return startIstioPilotMesh(t, env, istioInjectFiles(t).mesh)
}

// startIstioPilotMesh is startIstioPilot with the mesh config file mesh.
func startIstioPilotMesh(t *testing.T, env *kubetest.Env, mesh string) (secure, plain string) {
	t.Helper()
	discovery := istiobin.Path(t, istiobin.PilotDiscovery)
	secure, plain = freeAddr(t), freeAddr(t)
	startProcess(t, t.TempDir(), []string{
		"POD_NAMESPACE=istio-system", "POD_NAME=istiod-0", "REVISION=default", "JWT_POLICY=third-party-jwt",
		"PILOT_CERT_PROVIDER=istiod", "CLUSTER_ID=Kubernetes", "ISTIOD_ADDR=istiod.istio-system.svc:15012",
		"PILOT_ENABLE_ANALYSIS=false", "ENABLE_CA_SERVER=true", "KUBECONFIG=" + env.Kubeconfig,
		"ENABLE_DEBUG_ENDPOINT_AUTH=false",
	}, discovery, "discovery", "--kubeconfig", env.Kubeconfig, "--meshConfig", mesh,
		"--grpcAddr", plain, "--secureGRPCAddr", secure, "--httpAddr", freeAddr(t),
		"--monitoringAddr", freeAddr(t), "--httpsAddr", freeAddr(t))
	listening(t, secure)
	listening(t, plain)
	return secure, plain
}

// sameADSType: the ADS api_type in the Envoy bootstrap Istio's agent wrote
// for p is the one Skiff's agent writes for the same environment (delta by
// default: ISTIO_DELTA_XDS).
func sameADSType(t *testing.T, p *pod) {
	var b struct {
		DynamicResources struct {
			AdsConfig struct {
				APIType string `json:"api_type"`
			} `json:"ads_config"`
		} `json:"dynamic_resources"`
	}
	path := filepath.Join(p.root, "etc/istio/proxy/envoy-rev.json")
	polltest.Within(t, 30*time.Second, "Istio's agent's Envoy bootstrap", func() bool {
		raw, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(raw, &b) == nil
	})
	cfg, err := config.Load(p.env(), "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := (&bootstrap.Envoy{Delta: cfg.DeltaXDS}).JSON()
	if err != nil {
		t.Fatal(err)
	}
	var ours = b
	if err := json.Unmarshal(raw, &ours); err != nil {
		t.Fatal(err)
	}
	if got, want := ours.DynamicResources.AdsConfig.APIType, b.DynamicResources.AdsConfig.APIType; got != want || want == "" {
		t.Errorf("Skiff's agent writes ADS api_type %q, Istio's %q", got, want)
	}
}
