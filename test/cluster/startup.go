package cluster

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Startup is how long one pod took, measured by a watch opened before the
// pod is created.
type Startup struct {
	// AppRunning is create → the app container running (init containers done).
	AppRunning time.Duration
	// Ready is create → the pod Ready; zero when it never is (a sidecar
	// whose Envoy cannot run here).
	Ready time.Duration
}

// StartupPod is the pod StartPods creates: the demo's shell, in the
// namespace given. Injected, it has the sidecar template; agentOnly gives
// its istio-proxy DISABLE_ENVOY (the agent alone, so the pod gets Ready
// without Envoy; the CNI plugin leaves such pods alone, so CNI mode
// cannot use it).
func StartupPod(ns, name string, agentOnly bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "startup"},
		Annotations: map[string]string{"traffic.sidecar.istio.io/includeOutboundIPRanges": "", "traffic.sidecar.istio.io/includeInboundPorts": ""}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{
			Name: "shell", Image: "docker.io/skiff-mesh/shell:latest", ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 86400 & wait"}}}}}
	if agentOnly {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "auto", ImagePullPolicy: corev1.PullIfNotPresent,
			Env: []corev1.EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}}})
	}
	return p
}

// StartPods creates n pods one after the other and times each.
func (c *Cluster) StartPods(ctx context.Context, ns string, n int, agentOnly, wantReady bool) ([]Startup, error) {
	pods := c.Kube.Client.CoreV1().Pods(ns)
	var out []Startup
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("startup-%d-%d", time.Now().UnixNano()%1e6, i)
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if _, err := pods.Create(ctx, StartupPod(ns, name, agentOnly), metav1.CreateOptions{}); err != nil {
			w.Stop()
			return nil, err
		}
		s, err := timePod(ctx, w, start, wantReady)
		w.Stop()
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", name, err)
		}
		out = append(out, s)
		_ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	return out, nil
}

func timePod(ctx context.Context, w watch.Interface, start time.Time, wantReady bool) (Startup, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var s Startup
	for {
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return s, fmt.Errorf("watch closed")
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && s.observe(p, time.Since(start), wantReady) {
				return s, nil
			}
		}
	}
}

// observe records what p's status shows at now (since the pod's create)
// and reports whether the pod got as far as wanted.
func (s *Startup) observe(p *corev1.Pod, now time.Duration, wantReady bool) bool {
	if s.AppRunning == 0 && containerRunning(p, "shell") {
		s.AppRunning = now
	}
	for _, cnd := range p.Status.Conditions {
		if cnd.Type == corev1.PodReady && cnd.Status == corev1.ConditionTrue && s.Ready == 0 {
			s.Ready = now
		}
	}
	return s.AppRunning != 0 && (!wantReady || s.Ready != 0)
}

// Median returns the median of ds.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

var sandboxLine = regexp.MustCompile(`time="([^"]+)" level=info msg="RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),`)

// SandboxTimes reads containerd's log: for each pod whose name has the
// prefix, the time RunPodSandbox took (network setup, the CNI chain with
// istio-cni when it is installed, is most of it).
func (c *Cluster) SandboxTimes(prefix string) []time.Duration {
	return sandboxTimes(c.Node.Log("containerd"), prefix)
}

func sandboxTimes(log, prefix string) []time.Duration {
	begun := map[string]time.Time{}
	var out []time.Duration
	for _, l := range strings.Split(log, "\n") {
		m := sandboxLine.FindStringSubmatch(l)
		if m == nil || !strings.HasPrefix(m[2], prefix) {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if strings.Contains(l, "returns sandbox id") {
			if b, ok := begun[m[2]]; ok {
				out = append(out, t.Sub(b))
				delete(begun, m[2])
			}
			continue
		}
		begun[m[2]] = t
	}
	return out
}

var (
	sandboxID   = regexp.MustCompile(`msg="RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),.* returns sandbox id \\"([0-9a-f]+)\\""`)
	sandboxStop = regexp.MustCompile(`msg="StopPodSandbox for \\"([0-9a-f]+)\\" returns successfully"`)
)

// SandboxesRunning counts, from containerd's log, the sandboxes of pods
// whose name has the prefix that were made and not stopped yet (network
// teardown, the CNI DEL chain, is part of a stop).
func (c *Cluster) SandboxesRunning(prefix string) int {
	return sandboxesRunning(c.Node.Log("containerd"), prefix)
}

func sandboxesRunning(log, prefix string) int {
	running := map[string]bool{}
	for _, l := range strings.Split(log, "\n") {
		if m := sandboxID.FindStringSubmatch(l); m != nil && strings.HasPrefix(m[1], prefix) {
			running[m[2]] = true
		} else if m := sandboxStop.FindStringSubmatch(l); m != nil {
			delete(running, m[1])
		}
	}
	return len(running)
}
