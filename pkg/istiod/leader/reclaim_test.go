package leader_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// runningPod creates pod name in istio-system (the API server's object is
// all the election looks at).
func runningPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "istio-system"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "discovery", Image: "istiod"}}}}
	if _, err := c.CoreV1().Pods("istio-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// heldLease creates lease name held by holder for an hour.
func heldLease(ctx context.Context, t *testing.T, c kubernetes.Interface, name, holder string) {
	t.Helper()
	secs, now := int32(3600), metav1.NewMicroTime(time.Now())
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "istio-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
	if _, err := c.CoordinationV1().Leases("istio-system").Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// logLines collects a logger's lines, for waiting on one.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(b))
	l.mu.Unlock()
	return len(b), nil
}

func (l *logLines) has(sub ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		all := true
		for _, s := range sub {
			all = all && strings.Contains(line, s)
		}
		if all {
			return true
		}
	}
	return false
}

// TestKubeFreesLeaseOfGonePod: a lease held for an hour by a replica whose
// pod is gone (as after helm uninstall, which deletes istiod's Role before
// the pod can release it) is taken over at once; one held by a pod that
// exists is waited for, until that pod goes; one held by another
// Deployment's replica, or by a holder that is not a pod, is never freed.
func TestKubeFreesLeaseOfGonePod(t *testing.T) {
	env, ctx := startAPI(t)
	const self = "istiod-5d8f7b9c4-new01"
	runningPod(ctx, t, env.Client, self)
	heldLease(ctx, t, env.Client, "gone-holder", "istiod-5d8f7b9c4-old01")
	runningPod(ctx, t, env.Client, "istiod-7c9d8e6f5-old02")
	heldLease(ctx, t, env.Client, "running-holder", "istiod-7c9d8e6f5-old02")
	never := map[string]string{
		"other-deployment": "istiod-canary-6b5c4d3e2-old03", // gone, but another Deployment's
		"not-a-pod":        "unknown-laptop",
	}
	for l, h := range never {
		heldLease(ctx, t, env.Client, l, h)
	}

	logs := &logLines{}
	// Istio's durations: only the freeing can make a takeover this quick.
	e := leader.NewKube(clients(env.Client), leader.Config{Enabled: true, Namespace: "istio-system", Identity: self, LeaseDuration: leader.DefaultLeaseDuration},
		slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	runCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); e.Wait() })
	started := map[string]chan struct{}{}
	for _, l := range []string{"gone-holder", "running-holder", "other-deployment", "not-a-pod"} {
		started[l] = make(chan struct{})
		e.Go(runCtx, l, func(ctx context.Context) { close(started[l]); <-ctx.Done() })
	}
	neverStarted := func() {
		t.Helper()
		for l := range never {
			select {
			case <-started[l]:
				t.Fatalf("took over %s, held by %s", l, never[l])
			default:
			}
		}
	}

	select {
	case <-started["gone-holder"]:
	case <-time.After(5 * time.Second):
		t.Fatal("the lease of a pod that no longer exists was not taken over within 5 s")
	}
	if !logs.has("freed the lease", "holder=istiod-5d8f7b9c4-old01") {
		t.Errorf("no log line for the freed lease:\n%s", strings.Join(logs.lines, ""))
	}

	polltest.Until(t, "the running holder seen", func() bool { return logs.has("holder is running", "holder=istiod-7c9d8e6f5-old02") })
	select {
	case <-started["running-holder"]:
		t.Fatal("took over the lease of a pod that exists")
	default:
	}
	neverStarted()
	if err := env.Client.CoreV1().Pods("istio-system").Delete(ctx, "istiod-7c9d8e6f5-old02", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started["running-holder"]:
	case <-time.After(15 * time.Second):
		t.Fatal("the lease was not taken over after its holder's pod was deleted")
	}
	neverStarted()
}

// TestKubeKeepsLeasesWhenNotAPod: a process whose identity names no pod
// (outside the cluster, an external control plane) frees nothing, since
// its peers' pods would not be found either.
func TestKubeKeepsLeasesWhenNotAPod(t *testing.T) {
	env, ctx := startAPI(t)
	heldLease(ctx, t, env.Client, "peer-holder", "istiod-5d8f7b9c4-peer1")
	logs := &logLines{}
	e := leader.NewKube(clients(env.Client), leader.Config{Enabled: true, Namespace: "istio-system", Identity: "istiod-5d8f7b9c4-me001", LeaseDuration: leader.DefaultLeaseDuration},
		slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	runCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); e.Wait() })
	started := make(chan struct{})
	e.Go(runCtx, "peer-holder", func(ctx context.Context) { close(started); <-ctx.Done() })
	polltest.Until(t, "the holder seen", func() bool { return logs.has("holder is running", "holder=istiod-5d8f7b9c4-peer1") })
	select {
	case <-started:
		t.Fatal("took over a peer's lease although this process is not a pod")
	default:
	}
}
