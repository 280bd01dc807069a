package leader_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// singleton records which candidates run it; it fails the test when two
// run at once.
type singleton struct {
	t       *testing.T
	mu      sync.Mutex
	running map[string]bool
	terms   map[string]int
}

func (s *singleton) fn(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		s.mu.Lock()
		for other, on := range s.running {
			if on {
				s.t.Errorf("%s started while %s runs", id, other)
			}
		}
		s.running[id] = true
		s.terms[id]++
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		s.running[id] = false
		s.mu.Unlock()
	}
}

func (s *singleton) runner() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, on := range s.running {
		if on {
			return id
		}
	}
	return ""
}

func holder(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) string {
	t.Helper()
	l, err := c.CoordinationV1().Leases("istio-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

type candidate struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
}

func startCandidates(t *testing.T, env *kubetest.Env, lease string, s *singleton, n int) map[string]*candidate {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	out := map[string]*candidate{}
	for i := range n {
		id := fmt.Sprintf("istiod-%d", i)
		ctx, cancel := context.WithCancel(context.Background())
		e := leader.NewKube(clients(env.Client), leader.Config{Enabled: true, Namespace: "istio-system", Identity: id, LeaseDuration: 2 * time.Second}, log)
		c := &candidate{id: id, cancel: cancel, done: make(chan struct{})}
		e.Go(ctx, lease, s.fn(id))
		go func() {
			defer close(c.done)
			e.Wait()
		}()
		t.Cleanup(func() { cancel(); <-c.done })
		out[id] = c
	}
	return out
}

// startAPI starts an API server with istiod's namespace, istio-system.
func startAPI(t *testing.T) (*kubetest.Env, context.Context) {
	t.Helper()
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env, ctx
}

func TestKubeElection(t *testing.T) {
	env, ctx := startAPI(t)
	s := &singleton{t: t, running: map[string]bool{}, terms: map[string]int{}}
	cands := startCandidates(t, env, leader.NamespaceController, s, 3)

	var first string
	polltest.Within(t, 15*time.Second, "one candidate leads and runs the singleton", func() bool {
		first = s.runner()
		return first != "" && holder(ctx, t, env.Client, leader.NamespaceController) == first
	})

	t.Run("a stopped leader hands over at once", func(t *testing.T) {
		cands[first].cancel()
		<-cands[first].done // Wait returns once the singleton stopped and the lease is released
		if s.runner() == first {
			t.Fatalf("%s still runs the singleton after Wait returned", first)
		}
		var next string
		polltest.Within(t, 5*time.Second, "another candidate leads", func() bool {
			next = s.runner()
			return next != "" && next != first && holder(ctx, t, env.Client, leader.NamespaceController) == next
		})
		first = next
	})

	t.Run("a leader that loses the lease stops the singleton", func(t *testing.T) {
		// Another holder writes itself in, as a successor would after the
		// lease expired: the leader must stop within its renew deadline.
		// The intruder is a pod that exists, so nobody frees its lease.
		runningPod(ctx, t, env.Client, "intruder")
		leases := env.Client.CoordinationV1().Leases("istio-system")
		l, err := leases.Get(ctx, leader.NamespaceController, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		intruder, dur := "intruder", int32(3600)
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &intruder, &dur
		now := metav1.NewMicroTime(time.Now())
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		polltest.Within(t, 5*time.Second, "no candidate runs the singleton", func() bool { return s.runner() == "" })
		// The candidates keep campaigning: releasing the lease lets one back in.
		l, err = leases.Get(ctx, leader.NamespaceController, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec = coordinationv1.LeaseSpec{}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		polltest.Within(t, 5*time.Second, "a candidate leads again", func() bool { return s.runner() != "" })
	})
}

// TestKubeSingletonReturns: a singleton that returns while leading gives
// the lease up, and is started again on the next term.
func TestKubeSingletonReturns(t *testing.T) {
	env, _ := startAPI(t)
	e := leader.NewKube(clients(env.Client), leader.Config{Enabled: true, Namespace: "istio-system", Identity: "only", LeaseDuration: 2 * time.Second}, nil)
	runCtx, cancel := context.WithCancel(context.Background())
	terms := make(chan struct{}, 10)
	e.Go(runCtx, "test-returns", func(context.Context) { terms <- struct{}{} })
	t.Cleanup(func() { cancel(); e.Wait() })
	for i := range 2 {
		select {
		case <-terms:
		case <-time.After(15 * time.Second):
			t.Fatalf("term %d did not start", i+1)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
