package proxylesstest

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// Backend is a gRPC TestService on a loopback address that answers with
// its name and counts its calls. Reply, when set, decides each answer
// instead (return an error to fail the call).
type Backend struct {
	testpb.UnimplementedTestServiceServer
	// Name is what the backend answers with (SimpleResponse.Hostname).
	Name string
	// IP and Port are where it listens.
	IP   string
	Port int
	// Labels are its pod's labels (app and version select subsets).
	Labels map[string]string
	// Calls counts the calls it received.
	Calls atomic.Int64
	// Reply, when set, answers each call.
	Reply atomic.Pointer[func(context.Context) error]
}

// UnaryCall answers with the backend's name, or Reply's error.
func (b *Backend) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	b.Calls.Add(1)
	if r := b.Reply.Load(); r != nil {
		if err := (*r)(ctx); err != nil {
			return nil, err
		}
	}
	return &testpb.SimpleResponse{Hostname: b.Name}, nil
}

// SetReply makes f decide every later call; nil answers normally again.
func (b *Backend) SetReply(f func(context.Context) error) {
	if f == nil {
		b.Reply.Store(nil)
		return
	}
	b.Reply.Store(&f)
}

// StartBackend serves a plaintext backend on ip:0 until the test ends;
// labels are "k=v" pairs for its pod.
func StartBackend(t testing.TB, ip, name string, labels ...string) *Backend {
	t.Helper()
	lis, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{Name: name, IP: ip, Port: lis.Addr().(*net.TCPAddr).Port, Labels: map[string]string{}}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		b.Labels[k] = v
	}
	g := grpc.NewServer()
	testpb.RegisterTestServiceServer(g, b)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return b
}

// Service renders a Kubernetes Service name.ns with one gRPC port (named
// "grpc", at port), a Pod per backend (its labels, service account name,
// IP) and an EndpointSlice per backend (each backend has a port of its
// own). The documents go to Mesh.Write.
func Service(name, ns string, port int, backends ...*Backend) []string {
	docs := []string{fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  clusterIP: %s
  selector: {app: %s}
  ports:
  - {name: grpc, port: %d}`, name, ns, clusterIP(name, ns), name, port)}
	for i, b := range backends {
		pod := fmt.Sprintf("%s-%d", name, i)
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {%s}}
spec: {serviceAccountName: %s, containers: [{name: app, image: app}]}
status: {podIP: %s}`, pod, ns, labelList(name, b.Labels), name, b.IP),
			fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: %s
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
ports:
- {name: grpc, port: %d}
endpoints:
- addresses: [%q]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: %s}`, pod, ns, name, b.Port, b.IP, pod))
	}
	return docs
}

// clusterIP picks a stable service address for name.ns in 10.96.0.0/16.
func clusterIP(name, ns string) string {
	h := fnv.New32a()
	h.Write([]byte(ns + "/" + name))
	v := h.Sum32()
	return fmt.Sprintf("10.96.%d.%d", v>>8&0xff, v&0xfe+1)
}

// labelList renders labels (app defaulting to app) as flow-map entries.
func labelList(app string, labels map[string]string) string {
	all := map[string]string{"app": app}
	for k, v := range labels {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %q", k, all[k])
	}
	return strings.Join(parts, ", ")
}
