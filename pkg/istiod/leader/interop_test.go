package leader_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// clients are a clientset's REST clients for an election.
func clients(c kubernetes.Interface) leader.Clients {
	return leader.Clients{Coordination: c.CoordinationV1().RESTClient(), Core: c.CoreV1().RESTClient()}
}

// TestSharesLeaseWithClientGo: Skiff's election and client-go's
// leaderelection with a LeaseLock (what Istio's istiod elects with) on one
// Lease, as during an upgrade from Istio's istiod: never both leading, and
// each takes over at once when the other stops and releases it.
func TestSharesLeaseWithClientGo(t *testing.T) {
	env, ctx := startAPI(t)
	const lease = "istio-namespace-controller-election"
	var skiffLeads, clientGoLeads atomic.Bool
	both := make(chan struct{}, 1)
	check := func() {
		if skiffLeads.Load() && clientGoLeads.Load() {
			select {
			case both <- struct{}{}:
			default:
			}
		}
	}

	// client-go's candidate first, so that it leads.
	cgStop := clientGoCandidate(t, env, lease, "istio-istiod", &clientGoLeads, check)
	polltest.Within(t, 10*time.Second, "client-go's candidate leads", func() bool {
		return clientGoLeads.Load() && holder(ctx, t, env.Client, lease) == "istio-istiod"
	})

	sk := leader.NewKube(clients(env.Client), leader.Config{Enabled: true, Namespace: "istio-system", Identity: "skiff-istiod", LeaseDuration: 2 * time.Second}, nil)
	skCtx, skStop := context.WithCancel(context.Background())
	t.Cleanup(func() { skStop(); sk.Wait() })
	sk.Go(skCtx, lease, func(ctx context.Context) { skiffLeads.Store(true); check(); <-ctx.Done(); skiffLeads.Store(false) })

	// Skiff's candidate waits while client-go's renews.
	time.Sleep(3 * time.Second) // three lease durations of client-go renewing: an interval, not a wait for an event
	if skiffLeads.Load() {
		t.Fatal("Skiff's candidate leads while client-go's holds a valid lease")
	}

	cgStop()
	polltest.Within(t, 3*time.Second, "Skiff's candidate takes the released lease", func() bool {
		return skiffLeads.Load() && holder(ctx, t, env.Client, lease) == "skiff-istiod"
	})

	// And the other way round: client-go's waits, then takes over at once.
	clientGoCandidate(t, env, lease, "istio-istiod-2", &clientGoLeads, check)
	time.Sleep(3 * time.Second) // as above
	if clientGoLeads.Load() {
		t.Fatal("client-go's candidate leads while Skiff's holds a valid lease")
	}
	skStop()
	sk.Wait()
	polltest.Within(t, 3*time.Second, "client-go's candidate takes the released lease", func() bool {
		return clientGoLeads.Load() && holder(ctx, t, env.Client, lease) == "istio-istiod-2"
	})
	select {
	case <-both:
		t.Fatal("both candidates led at once")
	default:
	}
}

// clientGoCandidate campaigns for lease with client-go's leaderelection, as
// Istio's istiod does, setting leads while it leads, until stop is called
// (which releases the lease and returns once the elector has stopped).
func clientGoCandidate(t *testing.T, env *kubetest.Env, lease, id string, leads *atomic.Bool, check func()) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "istio-system", Name: lease},
			Client:     env.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 250 * time.Millisecond,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { leads.Store(true); check(); <-ctx.Done() },
			OnStoppedLeading: func() { leads.Store(false) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(done); le.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}
