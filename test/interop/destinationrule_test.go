package interop

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestDestinationRulePickAsIstio: which DestinationRule a sidecar's
// cluster takes, where several namespaces hold one for its host, is the
// one Istio 1.31's own pilot-discovery picks, on the same API server: the
// proxy's namespace's, then the service's, then the root namespace's, and
// never one from any other namespace. Each rule sets its own connection
// limit, which the cluster's circuit breaker shows.
func TestDestinationRulePickAsIstio(t *testing.T) {
	istiod := skiff(t, "istiod") // before the API server's context: on a new machine this build takes minutes
	env, ctx := crdtest.Start(t)
	proxyNS, svcNS, otherNS := netnstest.UniqueName("dr-proxy-"), netnstest.UniqueName("dr-svc-"), netnstest.UniqueName("dr-other-")
	withReviews(t, ctx, env, "10.0.0.60", svcNS, proxyNS, otherNS)
	host := "reviews." + svcNS + ".svc.cluster.local"
	// Every rule, each with the connection limit that tells it apart.
	rules := []struct {
		ns    string
		limit int64
	}{{proxyNS, 11}, {svcNS, 22}, {"istio-system", 33}, {otherNS, 44}}
	for _, r := range rules {
		createIstio(t, ctx, env, "destinationrules", map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
			"metadata": map[string]any{"name": "reviews", "namespace": r.ns},
			"spec": map[string]any{"host": host, "trafficPolicy": map[string]any{
				"connectionPool": map[string]any{"tcp": map[string]any{"maxConnections": r.limit}}}},
		})
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	drs := dyn.Resource(schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"})

	istioPlain, skiffPlain := bothControlPlanes(t, env, istiod)
	cluster := "outbound|9080||" + host
	planes := []struct {
		name  string
		limit *atomic.Int64
	}{
		{"Istio's pilot-discovery", watchConnectionLimit(t, ctx, istioPlain, proxyNS, cluster)},
		{"Skiff's istiod", watchConnectionLimit(t, ctx, skiffPlain, proxyNS, cluster)},
	}
	// Each step removes the rule that applied; the next in Istio's order
	// takes over. With the root namespace's gone, no rule applies: the
	// other namespace's never does.
	for i, r := range rules[:3] {
		for _, p := range planes {
			polltest.Within(t, 30*time.Second, fmt.Sprintf("%s: the rule in %s (limit %d)", p.name, r.ns, r.limit), func() bool {
				return p.limit.Load() == r.limit
			})
		}
		if err := drs.Namespace(r.ns).Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			for _, p := range planes {
				polltest.Within(t, 30*time.Second, p.name+": the root namespace's rule dropped", func() bool {
					return p.limit.Load() != r.limit
				})
				if got := p.limit.Load(); got == rules[3].limit {
					t.Errorf("%s: took the rule in namespace %s (limit %d), which Istio never applies", p.name, otherNS, got)
				}
			}
		}
	}
}

// watchConnectionLimit keeps a state-of-the-world CDS stream to the
// plaintext xDS address as a sidecar in namespace ns, and returns the
// connection limit of cluster's circuit breaker as last received (0 until
// the cluster arrives).
func watchConnectionLimit(t *testing.T, ctx context.Context, addr, ns, cluster string) *atomic.Int64 {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	stream, node := adsAsSidecar(t, sctx, addr, ns)
	const cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: cds}); err != nil {
		t.Fatal(err)
	}
	limit := &atomic.Int64{}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			for _, a := range resp.GetResources() {
				var c clusterv3.Cluster
				if a.UnmarshalTo(&c) != nil || c.GetName() != cluster {
					continue
				}
				var n int64
				if th := c.GetCircuitBreakers().GetThresholds(); len(th) > 0 {
					n = int64(th[0].GetMaxConnections().GetValue())
				}
				limit.Store(n)
			}
			ack := &discoveryv3.DiscoveryRequest{TypeUrl: cds, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
			if stream.Send(ack) != nil {
				return
			}
		}
	}()
	return limit
}

// adsAsSidecar opens an ADS stream on ctx to the plaintext xDS address and
// returns it with the node of a sidecar in namespace ns, for the first
// request. The connection closes when the test ends.
func adsAsSidecar(t *testing.T, ctx context.Context, addr, ns string) (discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, *corev3.Node) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0",
		"LABELS": map[string]any{"app": "client"}})
	if err != nil {
		t.Fatal(err)
	}
	return stream, &corev3.Node{Id: "sidecar~10.1.2.9~client-0." + ns + "~" + ns + ".svc.cluster.local", Metadata: meta}
}

// withReviews creates istio-system, svcNS and the other namespaces, and
// the service reviews in svcNS (HTTP on 9080) at clusterIP.
func withReviews(t *testing.T, ctx context.Context, env *kubetest.Env, clusterIP, svcNS string, others ...string) {
	t.Helper()
	for _, name := range append([]string{"istio-system", svcNS}, others...) {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	withService(t, ctx, env, svcNS, "reviews", clusterIP)
}

// withService creates the service name in ns (HTTP on 9080) at clusterIP.
func withService(t *testing.T, ctx context.Context, env *kubetest.Env, ns, name, clusterIP string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createIstio creates obj, an object of networking.istio.io/v1 resource
// (virtualservices, destinationrules) as unstructured content, in the
// namespace its metadata names.
func createIstio(t *testing.T, ctx context.Context, env *kubetest.Env, resource string, obj map[string]any) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: resource}
	if _, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bothControlPlanes starts Istio 1.31's pilot-discovery and Skiff's
// istiod (the binary at istiod) on env's API server, both with the mesh
// config of Istio's chart, and returns their plaintext xDS addresses once
// both listen.
func bothControlPlanes(t *testing.T, env *kubetest.Env, istiod string) (istioAddr, skiffAddr string) {
	t.Helper()
	return bothControlPlanesMesh(t, env, istiod, istioInjectFiles(t).mesh)
}

// bothControlPlanesMesh is bothControlPlanes with the mesh config file mesh.
func bothControlPlanesMesh(t *testing.T, env *kubetest.Env, istiod, mesh string) (istioAddr, skiffAddr string) {
	t.Helper()
	_, istioAddr = startIstioPilotMesh(t, env, mesh)
	skiffAddr = freeAddr(t)
	startProcess(t, t.TempDir(), nil, istiod, "--kubeconfig", env.Kubeconfig, "--meshConfig", mesh,
		"--grpcAddr", skiffAddr, "--secureGRPCAddr", freeAddr(t), "--httpAddr", freeAddr(t),
		"--monitoringAddr", "", "--httpsAddr", freeAddr(t))
	listening(t, skiffAddr)
	return istioAddr, skiffAddr
}
