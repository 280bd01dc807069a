package ha_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
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
var leases = []string{leader.NamespaceController}

// staleLease is the webhook patcher's Lease of earlier Skiff releases,
// held by a replica that is gone (as after helm uninstall deleted istiod's
// RBAC before its pod could release it). Every replica patches the webhook
// configurations at once regardless, as in Istio 1.31.
const staleLease = "istio-validation-controller-election-default"

// TestThreeReplicas runs three istiod processes against one API server,
// kills the leader and checks that a survivor takes its singletons over,
// that a proxyless client rides it out, that nothing is rewritten in a
// loop afterwards, and that a replica stopped with SIGTERM releases its
// leases as it exits.
func TestThreeReplicas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (the API server harness)")
	}
	bin := buildIstiod(t) // before the API server's context: on a new machine this build takes minutes
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
	b1, b2 := proxylesstest.StartBackend(t, "127.0.0.1", "b1"), proxylesstest.StartBackend(t, "127.0.0.1", "b2")
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	createEcho(ctx, t, ic, b1)

	holdStaleLease(ctx, t, c, staleLease, "istiod-gone")
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

	// Every part of a replica (registry, CA, webhooks and their patcher,
	// mesh config, leader election) reaches the API server on one
	// connection, as Istio's istiod does. (They share one set of clients,
	// istiod.Config.Clients; client-go would also share one transport
	// between clients of one TLS configuration.)
	for id, r := range replicas {
		if n := apiServerConns(t, r.cmd.Process.Pid, env.URL); n != 1 {
			t.Errorf("%s holds %d connections to the API server, want 1", id, n)
		}
	}

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
	client := proxylesstest.Client(t, fwd.addr(), target, "default")
	if got, err := proxylesstest.Call(ctx, client); err != nil || got != "b1" {
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
		if got, err := proxylesstest.Call(ctx, client); err != nil || got != "b1" {
			t.Fatalf("rpc %d after the kill: answer %q, %v; want b1 from the kept configuration", i, got, err)
		}
	}

	polltest.Within(t, 15*time.Second, "a survivor takes the root publisher's lease", func() bool {
		h := holder(ctx, c, leader.NamespaceController)
		return h != "" && h != victim.id && replicas[h] != nil
	})
	successor := holder(ctx, c, leader.NamespaceController)
	t.Logf("%s took over from %s in %v", successor, victim.id, time.Since(killed).Round(time.Millisecond))
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
		got, err := proxylesstest.Call(ctx, client)
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

	// A replica told to stop (SIGTERM, as the kubelet does) releases its
	// leases before exiting: right after it exits, it holds none of them,
	// although they would not have expired yet.
	stopping := replicas[successor]
	if err := stopping.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopping.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit on SIGTERM", stopping.id)
	}
	for _, l := range leases {
		if h := holder(ctx, c, l); h == stopping.id {
			t.Errorf("%s exited still holding %s", stopping.id, l)
		}
	}
	polltest.Within(t, 15*time.Second, "the last replica holds every lease", func() bool {
		for _, l := range leases {
			if h := holder(ctx, c, l); h == "" || h == victim.id || h == stopping.id {
				return false
			}
		}
		return true
	})
}
