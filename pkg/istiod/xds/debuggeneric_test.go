package xds_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// echoDebug is a debug mux that answers each path with what it was asked
// (path, query, the caller's namespace) and counts the requests.
func echoDebug(calls *atomic.Int32) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		ns, _ := r.Context().Value(xds.CallerNamespaceKey{}).(string)
		fmt.Fprintf(w, "path=%s query=%s caller=%q", r.URL.Path, r.URL.RawQuery, ns)
	})
	return mux
}

// TestDebugGenericOverXDS asks for Istio's generic istio.io/debug type as
// `istioctl x internal-debug` does: the debug path as the one resource
// name, the endpoint's body as the one resource's value.
func TestDebugGenericOverXDS(t *testing.T) {
	d := newDebugEnv(t)
	var calls atomic.Int32
	d.srv.SetDebugHandler(echoDebug(&calls))
	cart := d.sotw(t, cartProxy, nil)
	must(t, cart.Subscribe(gen.ClusterType, nil, wait))
	pp := d.sotw(t, productpage, nil)
	must(t, pp.Subscribe(gen.ClusterType, nil, wait))
	d.waitStatus(t, cartProxy, "CDS", xds.StatusSynced)
	d.waitStatus(t, productpage, "CDS", xds.StatusSynced)
	system := func() []grpc.DialOption { return d.tlsDial(d.token(t, "istio-system", "default")) }
	shop := func() []grpc.DialOption { return d.tlsDial(d.token(t, "shop", "cart")) }

	for _, tc := range []struct {
		name      string
		dial      func() []grpc.DialOption
		node      string // namespace of the caller's node
		resources []string
		want      string // the body; "" when wantCode is set
		wantCode  codes.Code
		served    bool // the debug mux was asked
	}{
		{"system caller: syncz", system, "istio-system", []string{"syncz"}, `path=/debug/syncz query= caller=""`, codes.OK, true},
		{"system caller: config_dump", system, "istio-system", []string{"config_dump?proxyID=" + cartProxy},
			`path=/debug/config_dump query=proxyID=` + cartProxy + ` caller=""`, codes.OK, true},
		{"namespace caller: its own proxy", shop, "shop", []string{"config_dump?proxyID=" + cartProxy},
			`path=/debug/config_dump query=proxyID=` + cartProxy + ` caller="shop"`, codes.OK, true},
		{"namespace caller: another namespace's proxy", shop, "shop", []string{"config_dump?proxyID=" + productpage},
			fmt.Sprintf("proxy %q is not connected\n", productpage), codes.OK, false},
		{"namespace caller: syncz", shop, "shop", []string{"syncz"}, "", codes.PermissionDenied, false},
		{"no resource", system, "istio-system", nil, "", codes.InvalidArgument, false},
		{"two resources", system, "istio-system", []string{"syncz", "configz"}, "", codes.InvalidArgument, false},
		{"plaintext", func() []grpc.DialOption {
			return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		}, "istio-system", []string{"syncz"}, "", codes.Unauthenticated, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := d.tlsAddr
			if tc.wantCode == codes.Unauthenticated {
				addr = d.addr
			}
			before := calls.Load()
			sa := "default"
			if tc.node == "shop" {
				sa = "cart"
			}
			r, err := ask(t, addr, tc.dial(), istioctlNode(tc.node, sa), xds.DebugGeneric, tc.resources...)
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("got %v, want %s", err, tc.wantCode)
			}
			if served := calls.Load() != before; served != tc.served {
				t.Errorf("debug mux asked: %v, want %v", served, tc.served)
			}
			if tc.wantCode != codes.OK {
				return
			}
			if r.GetTypeUrl() != xds.DebugGeneric || len(r.GetResources()) != 1 {
				t.Fatalf("response %s with %d resources, want %s with 1", r.GetTypeUrl(), len(r.GetResources()), xds.DebugGeneric)
			}
			res := r.GetResources()[0]
			if res.GetTypeUrl() != xds.DebugGeneric || string(res.GetValue()) != tc.want {
				t.Errorf("resource %s %q, want %s %q", res.GetTypeUrl(), res.GetValue(), xds.DebugGeneric, tc.want)
			}
		})
	}

	t.Run("delta", func(t *testing.T) {
		s := openDelta(t, d.tlsAddr, system()...)
		must(t, s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: istioctlNode("istio-system", "default"), TypeUrl: xds.DebugGeneric,
			ResourceNamesSubscribe: []string{"configz"}}))
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != "configz" ||
			string(r.GetResources()[0].GetResource().GetValue()) != `path=/debug/configz query= caller=""` {
			t.Errorf("delta answer %v", r.GetResources())
		}
	})
}

// TestDebugGenericWithoutHandler: an istiod with no debug endpoints says
// so (Unavailable) rather than answering nothing.
func TestDebugGenericWithoutHandler(t *testing.T) {
	e := newEnvWith(t, xds.Options{DebugAuthOff: true})
	_, err := ask(t, e.addr, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		istioctlNode("istio-system", "default"), xds.DebugGeneric, "syncz")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
}
