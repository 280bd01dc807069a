package ha_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const target = "xds:///echo.ha.test:9080"

// validatingOptions keep validation failing open: the configuration points
// at an istiod Service the test cluster does not have, and the test's own
// writes must pass it.
var validatingOptions = webhook.ConfigurationOptions{ValidationFailurePolicy: admissionregv1.Ignore}

// leases are the singletons' Leases, in istio-system.
var leases = []string{leader.NamespaceController, leader.PerRevision(leader.ValidationController, "default")}

// TestThreeReplicas runs three istiod processes against one API server,
// kills the leader and checks that a survivor takes its singletons over,
// that a proxyless client rides it out and that nothing is rewritten in a
// loop afterwards.
func TestThreeReplicas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (the API server harness)")
	}
	env, ctx := crdtest.Start(t)
	c := env.Client
	for _, ns := range []string{"istio-system", "ha-a", "ha-b"} {
		mustCreateNamespace(ctx, t, c, ns)
	}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhook.MutatingConfiguration(webhook.ConfigurationOptions{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhook.ValidatingConfiguration(validatingOptions), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	createEcho(ctx, t, ic, b1)

	bin := buildIstiod(t)
	replicas := map[string]*replica{}
	for i := range 3 {
		id := fmt.Sprintf("istiod-ha-%d", i)
		replicas[id] = startReplica(t, bin, env, id)
	}

	holders := map[string]string{}
	polltest.Within(t, 30*time.Second, "every lease held by a replica", func() bool {
		for _, l := range leases {
			h := holder(ctx, c, l)
			if replicas[h] == nil {
				return false
			}
			holders[l] = h
		}
		return true
	})
	for _, l := range leases {
		waitLogged(t, replicas[holders[l]], 15*time.Second, becameLeader(l))
		for id, r := range replicas {
			if n := r.count(becameLeader(l)); (id == holders[l]) != (n == 1) || n > 1 {
				t.Errorf("%s started the %s singleton %d times; the holder is %s", id, l, n, holders[l])
			}
		}
	}
	t.Logf("leaders: %v", holders)

	root := secretRoot(ctx, t, c)
	waitPublished(ctx, t, c, root, "istio-system", "default", "ha-a", "ha-b")
	waitCABundles(ctx, t, c, root)

	// The client reaches istiod through a forwarder that prefers the
	// root publisher's leader, the replica about to be killed.
	victim := replicas[holders[leader.NamespaceController]]
	order := []string{victim.grpc}
	for _, r := range replicas {
		if r != victim {
			order = append(order, r.grpc)
		}
	}
	fwd := startForwarder(t, order...)
	client := xdsClient(t, fwd.addr(), target)
	if got, err := call(ctx, client); err != nil || got != "b1" {
		t.Fatalf("before the kill: answer %q, %v; want b1", got, err)
	}
	if fwd.upstream() != victim.grpc {
		t.Fatalf("client connected to %s, want the leader %s at %s", fwd.upstream(), victim.id, victim.grpc)
	}

	// Writes from the kill until everything is restored: the watch must see
	// the successor's (so the quiet-period count below means something),
	// and only a few.
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	takeoverWrites := watchWrites(tctx, t, c)
	killed := time.Now()
	victim.kill()
	// While no replica leads: a new namespace (the successor must publish
	// into it) and an edited caBundle (it must restore it).
	mustCreateNamespace(ctx, t, c, "ha-late")
	breakCABundle(ctx, t, c)
	// The client keeps its last configuration while it reconnects.
	for i := range 20 {
		if got, err := call(ctx, client); err != nil || got != "b1" {
			t.Fatalf("rpc %d after the kill: answer %q, %v; want b1 from the kept configuration", i, got, err)
		}
	}

	polltest.Within(t, 15*time.Second, "a survivor takes the root publisher's lease", func() bool {
		h := holder(ctx, c, leader.NamespaceController)
		return h != "" && h != victim.id && replicas[h] != nil
	})
	successor := holder(ctx, c, leader.NamespaceController)
	t.Logf("%s took over from %s in %v", successor, victim.id, time.Since(killed).Round(time.Millisecond))
	polltest.Within(t, 15*time.Second, "the webhook patcher's lease held by a survivor", func() bool {
		h := holder(ctx, c, leases[1])
		return h != "" && h != victim.id && replicas[h] != nil
	})
	waitPublished(ctx, t, c, root, "ha-late", "istio-system", "default", "ha-a", "ha-b")
	waitCABundles(ctx, t, c, root)
	for _, l := range leases {
		h := holder(ctx, c, l)
		for id, r := range replicas {
			if r == victim {
				continue
			}
			if n := r.count(becameLeader(l)); (id == h) != (n == 1) || n > 1 {
				t.Errorf("after the kill %s started the %s singleton %d times; the holder is %s", id, l, n, h)
			}
		}
	}
	// Ours (the caBundle edit) and the successors' (the new namespace's
	// ConfigMap, the caBundle restored) are seen; nothing else is written.
	polltest.Within(t, 10*time.Second, "the takeover's writes seen by the watch", func() bool {
		return len(takeoverWrites.seen()) >= 3
	})
	tcancel()
	if w := takeoverWrites.seen(); len(w) > 4 {
		t.Errorf("%d writes during the takeover, want 3 (caBundle edit, ha-late ConfigMap, caBundle restore):\n%v", len(w), w)
	} else {
		t.Logf("writes during the takeover: %v", w)
	}

	// New configuration reaches the client: it reconnected to a survivor.
	moveEcho(ctx, t, ic, b2)
	polltest.Within(t, 30*time.Second, "the client follows an endpoint change served by a survivor", func() bool {
		got, err := call(ctx, client)
		return err == nil && got == "b2"
	})
	if up := fwd.upstream(); up == victim.grpc || up == "" {
		t.Fatalf("client's connection went to %q, want a survivor", up)
	}

	// Quiet period: with everything in place, the singletons write nothing
	// (a bounded few at most), however many leases are renewed meanwhile.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writes := watchWrites(wctx, t, c)
	quiet := time.NewTimer(3 * leaseDuration)
	defer quiet.Stop()
	<-quiet.C
	if w := writes.seen(); len(w) > 2 {
		t.Fatalf("%d writes to root ConfigMaps and webhook configurations over %v of quiet, want at most 2:\n%v", len(w), 3*leaseDuration, w)
	} else {
		t.Logf("writes over the quiet period: %v", w)
	}
}

func mustCreateNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func holder(ctx context.Context, c kubernetes.Interface, name string) string {
	l, err := c.CoordinationV1().Leases("istio-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// secretRoot returns the self-signed root the replicas share.
func secretRoot(ctx context.Context, t *testing.T, c kubernetes.Interface) []byte {
	t.Helper()
	s, err := c.CoreV1().Secrets("istio-system").Get(ctx, ca.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Data[ca.RootCertFile]; len(r) > 0 {
		return r
	}
	return s.Data[ca.CACertFile]
}

func waitPublished(ctx context.Context, t *testing.T, c kubernetes.Interface, root []byte, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		polltest.Within(t, 15*time.Second, "root ConfigMap in "+ns, func() bool {
			cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, ca.RootConfigMapName, metav1.GetOptions{})
			return err == nil && bytes.Contains([]byte(cm.Data[ca.RootConfigMapKey]), bytes.TrimSpace(root))
		})
	}
}

func waitCABundles(ctx context.Context, t *testing.T, c kubernetes.Interface, root []byte) {
	t.Helper()
	a := c.AdmissionregistrationV1()
	polltest.Within(t, 15*time.Second, "caBundles patched with the root", func() bool {
		m, err := a.MutatingWebhookConfigurations().Get(ctx, webhook.MutatingConfiguration(webhook.ConfigurationOptions{}).Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		v, err := a.ValidatingWebhookConfigurations().Get(ctx, webhook.ValidatingConfiguration(validatingOptions).Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cc := range append(clientConfigs(m.Webhooks), validatingClientConfigs(v.Webhooks)...) {
			if !bytes.Contains(cc.CABundle, bytes.TrimSpace(root)) {
				return false
			}
		}
		return true
	})
}

func clientConfigs(whs []admissionregv1.MutatingWebhook) []admissionregv1.WebhookClientConfig {
	var out []admissionregv1.WebhookClientConfig
	for _, w := range whs {
		out = append(out, w.ClientConfig)
	}
	return out
}

func validatingClientConfigs(whs []admissionregv1.ValidatingWebhook) []admissionregv1.WebhookClientConfig {
	var out []admissionregv1.WebhookClientConfig
	for _, w := range whs {
		out = append(out, w.ClientConfig)
	}
	return out
}

// breakCABundle empties the first injection webhook's caBundle, as a helm
// upgrade resetting the configuration would.
func breakCABundle(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	mws := c.AdmissionregistrationV1().MutatingWebhookConfigurations()
	m, err := mws.Get(ctx, webhook.MutatingConfiguration(webhook.ConfigurationOptions{}).Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := mws.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// echoEntry is a ServiceEntry for echo.ha.test:9080 with one endpoint, b
// (EndpointSlices may not hold loopback addresses; ServiceEntries may).
func echoEntry(b *backend) *networkingv1.ServiceEntry {
	return &networkingv1.ServiceEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: networkingapi.ServiceEntry{
			Hosts:      []string{"echo.ha.test"},
			Ports:      []*networkingapi.ServicePort{{Number: 9080, Name: "grpc", Protocol: "GRPC"}},
			Location:   networkingapi.ServiceEntry_MESH_INTERNAL,
			Resolution: networkingapi.ServiceEntry_STATIC,
			Endpoints:  []*networkingapi.WorkloadEntry{{Address: "127.0.0.1", Ports: map[string]uint32{"grpc": uint32(b.port)}, Labels: map[string]string{"backend": b.name}}},
		},
	}
}

// createEcho makes the echo ServiceEntry with endpoint b.
func createEcho(ctx context.Context, t *testing.T, c istioclient.Interface, b *backend) {
	t.Helper()
	if _, err := c.NetworkingV1().ServiceEntries("default").Create(ctx, echoEntry(b), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// moveEcho points echo's endpoint at b.
func moveEcho(ctx context.Context, t *testing.T, c istioclient.Interface, b *backend) {
	t.Helper()
	ses := c.NetworkingV1().ServiceEntries("default")
	cur, err := ses.Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := echoEntry(b)
	next.ResourceVersion = cur.ResourceVersion
	if _, err := ses.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
