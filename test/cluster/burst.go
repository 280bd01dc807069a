package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/skiff-mesh/skiff/pkg/kubenode"
)

// StartBurst creates n pods at once, as a Deployment scaled up would, and
// times each from the moment the burst began. The pods are named
// prefix-0 … prefix-(n-1), the prefix SandboxTimes takes; their sidecars,
// when injected, ask for 10m of CPU. Then, even on
// failure, it deletes them and waits until they are gone, so that their
// teardown (CNI DEL) does not overlap whatever runs next.
func (c *Cluster) StartBurst(ctx context.Context, ns, prefix string, n int, agentOnly, wantReady bool) ([]Startup, error) {
	pods := c.Kube.Client.CoreV1().Pods(ns)
	sel := metav1.ListOptions{LabelSelector: "burst=" + prefix}
	cleanCtx, cancelClean := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelClean()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	w, err := pods.Watch(ctx, sel)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var g errgroup.Group
	for i := range n {
		p := StartupPod(ns, fmt.Sprintf("%s-%d", prefix, i), agentOnly)
		p.Labels["burst"] = prefix
		// The sidecar's default request (100m) would fit only a dozen
		// injected pods on a 2-core node.
		p.Annotations["sidecar.istio.io/proxyCPU"] = "10m"
		g.Go(func() error {
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}
	err = g.Wait()
	var out []Startup
	if err == nil {
		out, err = burstStarted(ctx, w, n, start, wantReady)
	}
	w.Stop()
	if err != nil {
		err = fmt.Errorf("burst %s: %w%s", prefix, err, c.stuck(cleanCtx, ns, sel))
	}
	if derr := deleteAll(cleanCtx, pods, sel); derr != nil {
		return nil, errors.Join(err, derr)
	}
	// Pods deleted without a grace period leave the API at once; the
	// kubelet stops their sandboxes after.
	stopCtx, cancelStop := context.WithTimeout(cleanCtx, 2*time.Minute)
	defer cancelStop()
	return out, errors.Join(err, kubenode.Poll(stopCtx, "the sandboxes of "+prefix+" stopped", func() (bool, error) {
		return c.SandboxesRunning(prefix+"-") == 0, nil
	}))
}

// burstStarted reads w until n pods got as far as wanted.
func burstStarted(ctx context.Context, w watch.Interface, n int, start time.Time, wantReady bool) ([]Startup, error) {
	seen := map[string]*Startup{}
	done := map[string]bool{}
	var out []Startup
	for len(out) < n {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d pods started: %w", len(out), n, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, fmt.Errorf("watch closed")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if done[p.Name] {
				continue
			}
			s := seen[p.Name]
			if s == nil {
				s = &Startup{}
				seen[p.Name] = s
			}
			if s.observe(p, time.Since(start), wantReady) {
				done[p.Name] = true
				out = append(out, *s)
			}
		}
	}
	return out, nil
}

// deleteAll deletes the pods sel matches, at once, and waits until they are
// gone.
func deleteAll(ctx context.Context, pods typedcorev1.PodInterface, sel metav1.ListOptions) error {
	zero := int64(0)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
		return fmt.Errorf("deleting pods %s: %w", sel.LabelSelector, err)
	}
	list, err := pods.List(ctx, sel)
	if err != nil {
		return err
	}
	left := map[string]bool{}
	for _, p := range list.Items {
		left[p.Name] = true
	}
	if len(left) == 0 {
		return nil
	}
	sel.ResourceVersion = list.ResourceVersion
	w, err := pods.Watch(ctx, sel)
	if err != nil {
		return err
	}
	defer w.Stop()
	for len(left) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods %s not gone: %w", len(left), sel.LabelSelector, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watching pods %s: watch closed", sel.LabelSelector)
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted {
				delete(left, p.Name)
			}
		}
	}
	return nil
}

// stuck describes the pods sel matches that are not running yet: their
// containers' states and their latest events.
func (c *Cluster) stuck(ctx context.Context, ns string, sel metav1.ListOptions) string {
	list, err := c.Kube.Client.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range list.Items {
		if containerRunning(&p, "shell") {
			continue
		}
		fmt.Fprintf(&b, "\n  %s: %s", p.Name, p.Status.Phase)
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "; %s restarts %d", st.Name, st.RestartCount)
			if t := st.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, " last exit %d %s", t.ExitCode, t.Reason)
			}
			if wt := st.State.Waiting; wt != nil {
				fmt.Fprintf(&b, " waiting %s", wt.Reason)
			}
		}
		evs, err := c.Kube.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err != nil {
			continue
		}
		for i, ev := range evs.Items {
			if i >= len(evs.Items)-3 {
				fmt.Fprintf(&b, "\n    event %s x%d: %.300s", ev.Reason, ev.Count, ev.Message)
			}
		}
	}
	return b.String()
}
