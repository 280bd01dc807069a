package xds_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/metrics"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/logtest"
)

// ratingsProxy is a second sidecar of namespace default; cartProxy one of
// namespace shop, whose Sidecar hides most of default.
const (
	ratingsProxy = "sidecar~127.0.0.21~ratings-0.default~default.svc.cluster.local"
	cartProxy    = "sidecar~127.0.0.51~cart-0.shop~shop.svc.cluster.local"
)

// failing wraps gen.Generate: while on, generating typeURL for proxy id
// fails.
type failing struct {
	on          atomic.Bool
	id, typeURL string
}

func (f *failing) generate(pc *model.PushContext, p *model.Proxy, typeURL string, names []string) ([]*gen.Resource, error) {
	if f.on.Load() && p.ID == f.id && typeURL == f.typeURL {
		return nil, errors.New("injected failure")
	}
	return gen.Generate(pc, p, typeURL, names)
}

// repush pushes the current inputs again as a full change of a new version.
func (e *env) repush() {
	e.n++
	pc := model.Rebuild(e.srv.PushContext(), e.in, "v"+strconv.Itoa(e.n))
	e.srv.Push(pc, fullChange())
}

// drain acknowledges every response until none comes for a quiet period,
// failing on an empty set of a wildcard type, and returns them by type.
func drain(t *testing.T, c *xdstest.SotW) map[string]*discoveryv3.DiscoveryResponse {
	t.Helper()
	got := map[string]*discoveryv3.DiscoveryResponse{}
	for {
		r, err := c.Recv(quiet)
		if err != nil {
			return got
		}
		if gen.IsWildcard(r.GetTypeUrl()) && len(r.GetResources()) == 0 {
			t.Fatalf("empty %s response: it would delete everything", gen.ShortName(r.GetTypeUrl()))
		}
		got[r.GetTypeUrl()] = r
		must(t, c.Ack(r, nil))
	}
}

// ddrain is drain for a delta client: removals fail the test.
func ddrain(t *testing.T, c *xdstest.Delta) map[string]*discoveryv3.DeltaDiscoveryResponse {
	t.Helper()
	got := map[string]*discoveryv3.DeltaDiscoveryResponse{}
	for {
		r, err := c.Recv(quiet)
		if err != nil {
			return got
		}
		if len(r.GetRemovedResources()) > 0 {
			t.Fatalf("%s response removes %v", gen.ShortName(r.GetTypeUrl()), r.GetRemovedResources())
		}
		got[r.GetTypeUrl()] = r
		must(t, c.Ack(r))
	}
}

// subscribeWildcard subscribes c to CDS and LDS, acknowledging both, and
// returns the cluster names.
func subscribeWildcard(t *testing.T, c *xdstest.SotW) []string {
	t.Helper()
	must(t, c.Request(gen.ClusterType, nil, "", "", nil))
	cds := recv(t, c)
	must(t, c.Ack(cds, nil))
	must(t, c.Subscribe(gen.ListenerType, nil, wait))
	return names(t, cds)
}

const detailsCluster = "outbound|3307||details.default.svc.cluster.local"

// errorOf returns the error syncz shows for typ of proxy id.
func (e *env) errorOf(id, typ string) string {
	for _, ps := range e.srv.Status() {
		if ps.Proxy == id {
			return ps.Types[typ].Error
		}
	}
	return ""
}

// TestGenerateErrorKeepsConfig makes CDS fail for one proxy during a push
// that adds a cluster: that proxy gets no CDS response at all (an empty one
// would delete its clusters), syncz shows ERROR with the cause and the
// internal error counter counts it, while another proxy gets the new
// cluster. Once CDS generates again the proxy gets it and is SYNCED.
func TestGenerateErrorKeepsConfig(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		f := &failing{id: productpage, typeURL: gen.ClusterType}
		m := metrics.New(prometheus.NewRegistry())
		e := newEnvWith(t, xds.Options{Metrics: m, Generate: f.generate})
		a, b := e.sotw(t, productpage, nil), e.sotw(t, ratingsProxy, nil)
		before := subscribeWildcard(t, a)
		subscribeWildcard(t, b)
		if slices.Contains(before, detailsCluster) {
			t.Fatalf("%s exists before the change", detailsCluster)
		}

		f.on.Store(true)
		e.push(t, e.with(t, detailsService))
		if r := drain(t, b)[gen.ClusterType]; r == nil || !slices.Contains(names(t, r), detailsCluster) {
			t.Fatalf("the other proxy did not get %s", detailsCluster)
		}
		if r := drain(t, a)[gen.ClusterType]; r != nil {
			t.Fatalf("the failing proxy got a CDS response with %d clusters", len(r.GetResources()))
		}
		e.waitStatus(t, productpage, "CDS", xds.StatusError)
		if msg := e.errorOf(productpage, "CDS"); !strings.Contains(msg, "injected failure") {
			t.Errorf("syncz error %q does not name the cause", msg)
		}
		e.waitStatus(t, ratingsProxy, "CDS", xds.StatusSynced)
		e.waitStatus(t, productpage, "LDS", xds.StatusSynced)
		if n := testutil.ToFloat64(m.InternalErrors.WithLabelValues("cds")); n != 1 {
			t.Errorf("pilot_total_xds_internal_errors{type=cds} = %v, want 1", n)
		}

		f.on.Store(false)
		e.repush()
		r := drain(t, a)[gen.ClusterType]
		if r == nil || !slices.Contains(names(t, r), detailsCluster) {
			t.Fatalf("after recovery the proxy did not get %s", detailsCluster)
		}
		e.waitStatus(t, productpage, "CDS", xds.StatusSynced)
	})
	t.Run("delta", func(t *testing.T) {
		f := &failing{id: productpage, typeURL: gen.ClusterType}
		m := metrics.New(prometheus.NewRegistry())
		e := newEnvWith(t, xds.Options{Metrics: m, Generate: f.generate})
		a, b := e.delta(t, productpage), e.delta(t, ratingsProxy)
		for _, c := range []*xdstest.Delta{a, b} {
			must(t, c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: gen.ClusterType}))
			must(t, c.Ack(drecv(t, c)))
		}

		f.on.Store(true)
		e.push(t, e.with(t, detailsService))
		if r := ddrain(t, b)[gen.ClusterType]; r == nil || !slices.Contains(dnames(r), detailsCluster) {
			t.Fatalf("the other proxy did not get %s", detailsCluster)
		}
		if r := ddrain(t, a)[gen.ClusterType]; r != nil {
			t.Fatalf("the failing proxy got a CDS response: %v", dnames(r))
		}
		e.waitStatus(t, productpage, "CDS", xds.StatusError)
		if n := testutil.ToFloat64(m.InternalErrors.WithLabelValues("cds")); n != 1 {
			t.Errorf("pilot_total_xds_internal_errors{type=cds} = %v, want 1", n)
		}

		f.on.Store(false)
		e.repush()
		r := ddrain(t, a)[gen.ClusterType]
		if r == nil || !slices.Contains(dnames(r), detailsCluster) {
			t.Fatalf("after recovery the proxy got %v, want %s among them", dnames(r), detailsCluster)
		}
		e.waitStatus(t, productpage, "CDS", xds.StatusSynced)
	})
}

// TestGenerateErrorFromBadService gives a real cause: a Service whose name
// is not valid UTF-8 cannot be marshaled into any resource that names it.
// Proxies that see it keep their config and show ERROR; a proxy of
// namespace shop, whose Sidecar hides the service, is unaffected.
func TestGenerateErrorFromBadService(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	logs := &logBuffer{}
	e := newEnvWith(t, xds.Options{Metrics: m, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	a, s := e.sotw(t, productpage, nil), e.sotw(t, cartProxy, nil)
	subscribeWildcard(t, a)
	subscribeWildcard(t, s)
	good := e.in

	bad := *e.in
	bad.Services = append(slices.Clip(bad.Services), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bad\xffname", Namespace: "default"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.99", Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}},
	})
	if ch := e.push(t, &bad); !ch.Full {
		t.Fatal("adding a service was not a full change")
	}
	if r := drain(t, a)[gen.ClusterType]; r != nil {
		t.Fatalf("the proxy seeing the bad service got a CDS response with %d clusters", len(r.GetResources()))
	}
	e.waitStatus(t, productpage, "CDS", xds.StatusError)
	if msg := e.errorOf(productpage, "CDS"); !strings.Contains(msg, "outbound|9080||bad") {
		t.Errorf("syncz error %q does not name the resource", msg)
	}
	if n := testutil.ToFloat64(m.InternalErrors.WithLabelValues("cds")); n != 1 {
		t.Errorf("pilot_total_xds_internal_errors{type=cds} = %v, want 1", n)
	}
	if !logs.has(func(r map[string]any) bool {
		res, _ := r["resource"].(string)
		return r["level"] == "ERROR" && r["proxy"] == productpage && r["type"] == "cds" && strings.HasPrefix(res, "outbound|9080||bad")
	}) {
		t.Errorf("no error log naming the proxy, type and resource:\n%s", logs)
	}
	drain(t, s)
	for _, typ := range []string{"CDS", "LDS"} {
		e.waitStatus(t, cartProxy, typ, xds.StatusSynced)
	}

	// Removing the service again: the clusters are those the proxy holds,
	// so nothing is resent, and the error is gone.
	e.push(t, good)
	if r := drain(t, a)[gen.ClusterType]; r != nil {
		t.Fatalf("the proxy got a CDS response of %d clusters it already holds", len(r.GetResources()))
	}
	e.waitStatus(t, productpage, "CDS", xds.StatusSynced)
	if msg := e.errorOf(productpage, "CDS"); msg != "" {
		t.Errorf("syncz still shows %q", msg)
	}
}

// logBuffer collects JSON log lines (the server logs from several
// goroutines).
type logBuffer struct{ logtest.Buffer }

// has reports whether a logged record satisfies ok.
func (l *logBuffer) has(ok func(map[string]any) bool) bool {
	for _, line := range strings.Split(l.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && ok(r) {
			return true
		}
	}
	return false
}
