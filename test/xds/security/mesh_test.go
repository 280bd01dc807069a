package security_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/polltest"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// ca issues workload certificates for the test mesh.
type ca struct {
	t  *testing.T
	is *pki.Issuer
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	root, err := pki.NewRoot(key, pkix.Name{Organization: []string{"cluster.local"}}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := pki.NewBundle(root)
	if err != nil {
		t.Fatal(err)
	}
	is, err := pki.NewIssuer(root, key, nil, bundle, now)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{t: t, is: is}
}

// identity writes the certificate files of ns/sa as the agent does for
// proxyless clients (cert-chain.pem, key.pem, root-cert.pem) into a new
// directory, and returns it.
func (c *ca) identity(ns, sa string) string {
	c.t.Helper()
	id, err := spiffe.New("cluster.local", ns, sa)
	if err != nil {
		c.t.Fatal(err)
	}
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		c.t.Fatal(err)
	}
	leaf, err := c.is.Issue(key.Public(), pki.LeafOptions{URIs: []*url.URL{id.URL()}, NotBefore: time.Now(), TTL: time.Hour})
	if err != nil {
		c.t.Fatal(err)
	}
	keyPEM, err := pki.EncodePrivateKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	dir := c.t.TempDir()
	files := map[string][]byte{
		"cert-chain.pem": pki.EncodeCertificates(append([]*x509.Certificate{leaf}, c.is.Chain()[:len(c.is.Chain())-1]...)...),
		"key.pem":        keyPEM,
		"root-cert.pem":  pki.EncodeCertificates(c.is.Root),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	return dir
}

// bootstrap is a grpc-go xDS bootstrap as Istio's agent writes it: the
// node of a proxyless workload at ip in ns (pod name pod), the
// certificates in certDir through the file_watcher provider "default"
// (none when certDir is empty), and Istio's server listener template.
func bootstrap(istiod, ip, pod, ns, certDir string) []byte {
	providers := ""
	if certDir != "" {
		providers = fmt.Sprintf(`"certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {
      "certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q, "refresh_interval": "900s"}}},`,
			filepath.Join(certDir, "cert-chain.pem"), filepath.Join(certDir, "key.pem"), filepath.Join(certDir, "root-cert.pem"))
	}
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~%s~%s.%s~%s.svc.cluster.local", "metadata": {"GENERATOR": "grpc", "NAMESPACE": %q}},
  %s
  "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%%s"
}`, istiod, ip, pod, ns, ns, ns, providers)
}

// echo is a TestService answering with its name.
type echo struct {
	testpb.UnimplementedTestServiceServer
	name string
}

func (e *echo) UnaryCall(_ context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Hostname: e.name}, nil
}

func (e *echo) EmptyCall(_ context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

// serveXDS runs grpc-go's xDS server for the workload ip/pod in ns (its
// identity's certificates in certDir) on lis until the test ends, and
// waits until it serves.
func serveXDS(t *testing.T, istiod string, lis net.Listener, ip, pod, ns, certDir string) {
	t.Helper()
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	serving := make(chan struct{})
	s, err := xds.NewGRPCServer(grpc.Creds(creds), xds.BootstrapContentsForTesting(bootstrap(istiod, ip, pod, ns, certDir)),
		xds.ServingModeCallback(func(_ net.Addr, a xds.ServingModeChangeArgs) {
			if a.Mode == connectivity.ServingModeServing {
				select {
				case <-serving:
				default:
					close(serving)
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	testpb.RegisterTestServiceServer(s, &echo{name: pod})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	polltest.Until(t, "xDS server serving", func() bool {
		select {
		case <-serving:
			return true
		default:
			return false
		}
	})
}

// client dials target through grpc-go's xDS resolver as the proxyless
// workload ip in ns with the certificates in certDir (mutual TLS where
// the cluster asks for it, plaintext otherwise).
func client(t *testing.T, istiod, ip, ns, certDir, target string) testpb.TestServiceClient {
	t.Helper()
	builder, err := xds.NewXDSResolverWithConfigForTesting(bootstrap(istiod, ip, "client", ns, certDir))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds), grpc.WithResolvers(builder))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// workload renders a Pod at ip with labels app=app (and extra "k: v"
// flow-map entries), and Services name (each selecting app=app, one
// "grpc" port 7070 to the workload's port) with their EndpointSlices.
func workload(app, ns, sa, ip, extraLabels string, port int, services ...string) []string {
	labels := "app: " + app
	if extraLabels != "" {
		labels += ", " + extraLabels
	}
	docs := []string{fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s-0, namespace: %s, labels: {%s}}
spec: {serviceAccountName: %s, containers: [{name: app, image: app}]}
status: {podIP: %s}`, app, ns, labels, sa, ip)}
	for i, svc := range services {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  clusterIP: 10.96.77.%d
  selector: {app: %s}
  ports: [{name: grpc, port: 7070, targetPort: %d}]`, svc, ns, 10+i, app, port),
			fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-0, namespace: %s, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints: [{addresses: [%q], conditions: {ready: true}, targetRef: {kind: Pod, name: %s-0}}]`, svc, ns, svc, port, ip, app))
	}
	return docs
}

// istioMutual renders a DestinationRule telling clients of host to use
// Istio mutual TLS.
func istioMutual(name, ns, host string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %s, namespace: %s}
spec: {host: %s, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}`, name, ns, host)
}
