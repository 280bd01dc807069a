package repair_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/cni/repair"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// client-go's klog flush daemon and idle keep-alive connections to
		// the test API server outlive the tests that used them.
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	)
}

// cluster is a namespace on a real API server, with pods bound to node
// names no kubelet runs: the test writes their status as a kubelet would.
type cluster struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
}

// create makes p (its namespace set to the cluster's) and then reports its
// status, as the kubelet does once it ran the init containers.
func (c *cluster) create(p *corev1.Pod) {
	c.t.Helper()
	ctx := kubetest.Context(c.t)
	p.Namespace = c.ns
	status := p.Status
	got, err := c.client.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create pod %s: %v", p.Name, err)
	}
	if len(status.InitContainerStatuses) == 0 {
		return
	}
	status.Phase = corev1.PodPending
	for i := range status.InitContainerStatuses {
		s := &status.InitContainerStatuses[i]
		s.Image, s.ImageID = "proxyv2", "proxyv2"
	}
	got.Status = status
	if _, err := c.client.CoreV1().Pods(c.ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("status of pod %s: %v", p.Name, err)
	}
}

func (c *cluster) get(name string) (*corev1.Pod, bool) {
	c.t.Helper()
	p, err := c.client.CoreV1().Pods(c.ns).Get(kubetest.Context(c.t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		c.t.Fatalf("get pod %s: %v", name, err)
	}
	return p, true
}

// deleted: gone, or being deleted (a pod bound to a node waits for its
// kubelet, which these tests don't have, to confirm).
func (c *cluster) deleted(name string) bool {
	p, ok := c.get(name)
	return !ok || p.DeletionTimestamp != nil
}

func (c *cluster) labelled(name string) bool {
	p, ok := c.get(name)
	return ok && p.Labels[repair.DefaultLabelKey] == repair.DefaultLabelValue
}

func (c *cluster) untouched(name string) bool {
	p, ok := c.get(name)
	if !ok {
		return false
	}
	_, labelled := p.Labels[repair.DefaultLabelKey]
	return p.DeletionTimestamp == nil && !labelled
}

func (c *cluster) events(reason string) map[string]bool {
	c.t.Helper()
	evs, err := c.client.CoreV1().Events(c.ns).List(kubetest.Context(c.t), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	m := map[string]bool{}
	for _, e := range evs.Items {
		if e.Reason == reason && e.Source.Component == repair.Component && e.Type == corev1.EventTypeWarning {
			m[e.InvolvedObject.Name] = true
		}
	}
	return m
}

// TestController runs the controller against a real API server, deleting
// in one namespace and labelling in another: broken pods found at start
// and created later are repaired; healthy pods, pods without the
// validation container, pods not injected and pods of another node are
// left alone.
func TestController(t *testing.T) {
	env := kubetest.Start(t)
	for i, tt := range []struct {
		name    string
		edit    func(*repair.Config)
		done    func(*cluster, string) bool
		reason  string
		metrics string
	}{
		{"delete", func(c *repair.Config) { c.DeletePods = true }, (*cluster).deleted, repair.ReasonDelete, "delete/success"},
		{"label", func(c *repair.Config) { c.LabelPods = true }, (*cluster).labelled, repair.ReasonLabel, "label/success"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("repair-%s-%d", tt.name, i)
			node, other := "node-"+ns, "elsewhere-"+ns
			ctx := kubetest.Context(t)
			if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = env.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
			})
			c := &cluster{t: t, client: env.Client, ns: ns}
			// Before the controller starts.
			c.create(pod(ns, "broken-early", node, crashLooping(126)))
			c.create(pod(ns, "healthy", node, passed))
			c.create(pod(ns, "starting", node))
			c.create(pod(ns, "other-code", node, crashLooping(1)))
			c.create(pod(ns, "istio-init", node, noValidation))
			c.create(pod(ns, "not-injected", node, crashLooping(126), notInjected))
			c.create(pod(ns, "other-node", other, crashLooping(126)))

			cfg := repair.DefaultConfig()
			cfg.NodeName = node
			tt.edit(&cfg)
			core, err := kuberest.NewCore(env.Config, true)
			if err != nil {
				t.Fatal(err)
			}
			ctrl, err := repair.New(cfg, core, repair.Kube{Client: core}, quiet())
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			results := map[string]int{}
			ctrl.Observe(func(a repair.Action, r repair.Result) {
				mu.Lock()
				defer mu.Unlock()
				results[string(a)+"/"+string(r)]++
			})
			runCtx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ctrl.Run(runCtx) }()
			t.Cleanup(func() {
				stop()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})

			polltest.Until(t, "the broken pod found at start repaired", func() bool { return tt.done(c, "broken-early") })
			// After: a pod whose first run of the validation container failed.
			c.create(pod(ns, "broken-late", node, failedOnce(126, "")))
			polltest.Until(t, "the broken pod created later repaired", func() bool { return tt.done(c, "broken-late") })
			// The controller handles changes in order: once a pod that
			// broke after all the others is repaired, it has judged them.
			c.create(pod(ns, "sentinel", node, crashLooping(126)))
			polltest.Until(t, "the sentinel repaired", func() bool { return tt.done(c, "sentinel") })
			for _, name := range []string{"healthy", "starting", "other-code", "istio-init", "not-injected", "other-node"} {
				if !c.untouched(name) {
					t.Errorf("pod %s was changed", name)
				}
			}
			polltest.Until(t, "an event for each repaired pod", func() bool {
				ev := c.events(tt.reason)
				return ev["broken-early"] && ev["broken-late"] && ev["sentinel"] && len(ev) == 3
			})
			mu.Lock()
			defer mu.Unlock()
			// A labelled pod changes once more: that change is a skip.
			if results[tt.metrics] != 3 || results[string(cfg.Action())+"/fail"] != 0 {
				t.Errorf("results %v, want %s three times and no failure", results, tt.metrics)
			}
		})
	}
}
