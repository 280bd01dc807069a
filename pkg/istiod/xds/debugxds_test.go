package xds_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// debugEnv is the sample mesh's xDS server also served on a TLS port that
// authenticates streams as istiod's 15012 does: a real CA (file mode) with
// a JWT authenticator, the RequireIdentity interceptor, and the identity
// handed to the xDS server.
type debugEnv struct {
	*env
	tlsAddr string
	key     crypto.Signer
}

const tokenIssuer = "https://skiff.test"

func newDebugEnv(t *testing.T) *debugEnv {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwt, err := ca.NewJWTAuthenticator(ca.JWTConfig{Issuer: tokenIssuer, Audiences: []string{"istio-ca"},
		Keys: []crypto.PublicKey{key.Public()}, TrustDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	d := newDebugEnvWith(t, jwt)
	d.key = key
	return d
}

// newDebugEnvWith is newDebugEnv with the CA's authenticators given.
func newDebugEnvWith(t *testing.T, auths ...ca.Authenticator) *debugEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.DiscardHandler)
	authority, err := ca.New(ctx, ca.Config{SelfSignedDir: t.TempDir(), Authenticators: auths}, log)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, xds.Options{
		Identity: func(ctx context.Context) (xds.Identity, bool) {
			id, ok := istiod.IdentityFrom(ctx)
			return xds.Identity{Namespace: id.Namespace, ServiceAccount: id.ServiceAccount}, ok
		},
		ControlPlane: xds.ControlPlane{ID: "istiod-5d8f9-abcde", Version: "1.31.0"},
	})
	g := istiod.NewGRPCServer(authority.ServerTLSConfig(), keepalive.ServerParameters{}, istiod.RequireIdentity(authority, log), log)
	e.srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return &debugEnv{env: e, tlsAddr: lis.Addr().String()}
}

// token mints a service-account token for the istio-ca audience, as the
// TokenRequest Istio's istioctl makes.
func (d *debugEnv) token(t *testing.T, ns, sa string) string {
	t.Helper()
	now := time.Now()
	tok, err := ca.SignToken(d.key, ca.TokenClaims{Issuer: tokenIssuer, Audiences: []string{"istio-ca"}, Namespace: ns, ServiceAccount: sa,
		IssuedAt: now.Add(-time.Minute), Expiry: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// bearer is gRPC per-call credentials "authorization: Bearer TOKEN", as
// Istio's istioctl sends its token.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// istioctlNode is the node Istio's istioctl (its adsc client) sends: the
// "event" generator, a made-up workload, the namespace and service account
// of its token, and a placeholder version.
func istioctlNode(ns, sa string) *corev3.Node {
	meta, _ := structpb.NewStruct(map[string]any{"GENERATOR": "event", "SERVICE_ACCOUNT": sa, "NAMESPACE": ns,
		"CLOUDRUN_ADDR": "", "ISTIO_VERSION": "65536.65536.65536"})
	return &corev3.Node{Id: "sidecar~10.1.2.3~test-1." + ns + "~" + ns + ".svc.cluster.local", Metadata: meta}
}

// ask sends one debug request as Istio's istioctl does and returns the
// response, or the stream's error.
func ask(t *testing.T, addr string, dial []grpc.DialOption, node *corev3.Node, typeURL string, names ...string) (*discoveryv3.DiscoveryResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	// A refused stream ends before the request is read: Send sees EOF,
	// Recv the status.
	// Istio's adsc puts a nonce of its own making in its first request.
	_ = s.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNames: names, ResponseNonce: time.Now().String()})
	r, err := s.Recv()
	if err != nil {
		return nil, err
	}
	// adsc acknowledges what it gets; that gets no answer.
	if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}); err != nil {
		return nil, err
	}
	return r, nil
}

func (d *debugEnv) tlsDial(tok string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})), //nolint:gosec // as istioctl
		grpc.WithPerRPCCredentials(bearer(tok)),
	}
}

// podID is a node id's proxy ID (POD.NS), by which syncz names a proxy.
func podID(nodeID string) string { return strings.Split(nodeID, "~")[2] }

// syncz decodes a syncz response: proxy ID to type short name to status.
func syncz(t *testing.T, r *discoveryv3.DiscoveryResponse) (map[string]map[string]string, map[string]*statusv3.ClientConfig) {
	t.Helper()
	out, configs := map[string]map[string]string{}, map[string]*statusv3.ClientConfig{}
	for _, a := range r.GetResources() {
		var cc statusv3.ClientConfig
		if err := a.UnmarshalTo(&cc); err != nil {
			t.Fatalf("syncz resource %s: %v", a.GetTypeUrl(), err)
		}
		types := map[string]string{}
		for _, x := range cc.GetGenericXdsConfigs() {
			types[gen.ShortName(x.GetTypeUrl())] = x.GetConfigStatus().String()
		}
		out[cc.GetNode().GetId()], configs[cc.GetNode().GetId()] = types, &cc
	}
	return out, configs
}

// TestDebugTypesOverXDS asks for istio.io/debug/syncz and config_dump as
// Istio's istioctl does (its node, a token for the istio-ca audience on the
// TLS port) and checks the answer as istioctl proxy-status reads it.
func TestDebugTypesOverXDS(t *testing.T) {
	d := newDebugEnv(t)
	pp := d.sotw(t, productpage, map[string]string{"CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"})
	must(t, pp.Subscribe(gen.ClusterType, nil, wait))
	must(t, pp.Request(gen.ListenerType, nil, "", "", nil)) // sent, not acknowledged
	recv(t, pp)
	// productpage's agent keeps a NameTable stream of its own with the same
	// node: syncz still shows one proxy.
	agent := d.sotw(t, productpage, map[string]string{"CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"})
	must(t, agent.Subscribe(gen.NameTableType, nil, wait))
	cart := d.sotw(t, cartProxy, nil)
	must(t, cart.Subscribe(gen.ClusterType, nil, wait))
	polltest.Within(t, wait, "the agent's NDS synced", func() bool {
		for _, ps := range d.srv.Status() {
			if ps.Proxy == productpage && ps.Types["NDS"].Status == xds.StatusSynced {
				return true
			}
		}
		return false
	})
	d.waitStatus(t, productpage, "CDS", xds.StatusSynced)
	d.waitStatus(t, cartProxy, "CDS", xds.StatusSynced)

	t.Run("syncz", func(t *testing.T) {
		r, err := ask(t, d.tlsAddr, d.tlsDial(d.token(t, "istio-system", "default")), istioctlNode("istio-system", "default"), xds.DebugSyncz)
		if err != nil {
			t.Fatal(err)
		}
		got, configs := syncz(t, r)
		want := map[string]map[string]string{
			podID(productpage): {"CDS": "SYNCED", "LDS": "STALE", "NDS": "SYNCED"},
			podID(cartProxy):   {"CDS": "SYNCED"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("syncz (-want +got):\n%s", diff)
		}
		meta := configs[podID(productpage)].GetNode().GetMetadata().AsMap()
		if diff := cmp.Diff(map[string]any{"CLUSTER_ID": "Kubernetes", "NAMESPACE": "default", "ISTIO_VERSION": "1.31.0"}, meta); diff != "" {
			t.Errorf("node metadata (-want +got):\n%s", diff)
		}
		for _, x := range configs[podID(productpage)].GetGenericXdsConfigs() {
			if x.GetLastUpdated() == nil {
				t.Errorf("%s: no last_updated", x.GetTypeUrl())
			}
		}
		var cp struct {
			Component, ID string
			Info          struct{ Version string }
		}
		if err := json.Unmarshal([]byte(r.GetControlPlane().GetIdentifier()), &cp); err != nil {
			t.Fatalf("control_plane.identifier %q: %v", r.GetControlPlane().GetIdentifier(), err)
		}
		if cp.Component != "istiod" || cp.ID != "istiod-5d8f9-abcde" || cp.Info.Version != "1.31.0" {
			t.Errorf("control plane %+v", cp)
		}
	})
	t.Run("config_dump", func(t *testing.T) {
		r, err := ask(t, d.tlsAddr, d.tlsDial(d.token(t, "istio-system", "default")), istioctlNode("istio-system", "default"),
			xds.DebugConfigDump, "productpage-0.default")
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		var clusters adminv3.ClustersConfigDump
		for _, a := range r.GetResources() {
			kinds = append(kinds, a.GetTypeUrl())
			if a.MessageIs(&clusters) {
				must(t, a.UnmarshalTo(&clusters))
			}
		}
		if len(kinds) != 7 {
			t.Fatalf("config dump has %d parts, want 7: %v", len(kinds), kinds)
		}
		pc := d.srv.PushContext()
		p, _ := d.srv.Proxy(productpage)
		want, err := gen.Generate(pc, p, gen.ClusterType, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(clusters.GetDynamicActiveClusters()); n != len(want) || n == 0 {
			t.Errorf("config dump has %d clusters, CDS %d", n, len(want))
		}
	})
	t.Run("namespace caller sees its namespace", func(t *testing.T) {
		r, err := ask(t, d.tlsAddr, d.tlsDial(d.token(t, "shop", "cart")), istioctlNode("shop", "cart"), xds.DebugSyncz)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := syncz(t, r)
		if _, ok := got[podID(cartProxy)]; !ok || len(got) != 1 {
			t.Errorf("a shop caller sees %v, want only %s", got, cartProxy)
		}
	})
	for _, tc := range []struct {
		name string
		addr func() string
		dial func() []grpc.DialOption
		node *corev3.Node
		want codes.Code
	}{
		{"plaintext port", func() string { return d.addr }, func() []grpc.DialOption {
			return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		}, istioctlNode("istio-system", "default"), codes.Unauthenticated},
		{"TLS without a token", func() string { return d.tlsAddr }, func() []grpc.DialOption {
			return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))} //nolint:gosec // as istioctl
		}, istioctlNode("istio-system", "default"), codes.Unauthenticated},
		{"token of another namespace than the node's", func() string { return d.tlsAddr }, func() []grpc.DialOption {
			return d.tlsDial(d.token(t, "shop", "cart"))
		}, istioctlNode("istio-system", "default"), codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ask(t, tc.addr(), tc.dial(), tc.node, xds.DebugSyncz)
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("delta syncz", func(t *testing.T) {
		s := openDelta(t, d.tlsAddr, d.tlsDial(d.token(t, "istio-system", "default"))...)
		must(t, s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: istioctlNode("istio-system", "default"), TypeUrl: xds.DebugSyncz}))
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, res := range r.GetResources() {
			ids = append(ids, res.GetName())
		}
		if diff := cmp.Diff([]string{podID(productpage), podID(cartProxy)}, ids); diff != "" {
			t.Errorf("delta syncz names (-want +got):\n%s", diff)
		}
	})
	if n := len(d.srv.Connections()); n != 3 {
		t.Errorf("%d connections after the debug streams, want the 3 proxy streams", n)
	}
}

// openDelta opens a delta ADS stream to addr, closed with the test (or
// after wait).
func openDelta(t *testing.T, addr string, opts ...grpc.DialOption) discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
