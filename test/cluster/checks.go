package cluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DemoNamespace is where the demo mesh runs.
const DemoNamespace = "demo"

// PodShape is a pod's containers, the part injection changes.
type PodShape struct {
	InitContainers, Containers []string
}

// Shape returns a pod spec's container names and images.
func Shape(spec corev1.PodSpec) PodShape {
	var s PodShape
	for _, c := range spec.InitContainers {
		s.InitContainers = append(s.InitContainers, c.Name+" ("+c.Image+")"+capAdds(c))
	}
	for _, c := range spec.Containers {
		s.Containers = append(s.Containers, c.Name+" ("+c.Image+")"+capAdds(c))
	}
	return s
}

func capAdds(c corev1.Container) string {
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Add) == 0 {
		return ""
	}
	var caps []string
	for _, a := range c.SecurityContext.Capabilities.Add {
		caps = append(caps, string(a))
	}
	return " +" + strings.Join(caps, ",")
}

// OnePod returns the only pod of a Deployment's app label.
func (c *Cluster) OnePod(ctx context.Context, app string) (*corev1.Pod, error) {
	pods, err := c.Pods(ctx, DemoNamespace, "app="+app)
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, fmt.Errorf("app=%s: %d pods, want 1", app, len(live))
	}
	return &live[0], nil
}

// CaptureRules returns iptables-save of a pod's network namespace, read
// from the node.
func (c *Cluster) CaptureRules(ctx context.Context, pod *corev1.Pod) (string, error) {
	out, err := c.Node.PodNetExec(ctx, string(pod.UID), "iptables-save")
	return string(out), err
}

// Identity returns the URI SANs of the workload certificate the agent of
// a grpc-agent pod wrote (OUTPUT_CERTS, an emptyDir read from the node).
func (c *Cluster) Identity(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	dir := path.Join("/var/lib/kubelet/pods", string(pod.UID), "volumes/kubernetes.io~empty-dir/istio-data")
	b, err := c.Node.Exec(ctx, "cat", dir+"/cert-chain.pem")
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("pod %s: no certificate in %s/cert-chain.pem", pod.Name, dir)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	var uris []string
	for _, u := range cert.URIs {
		uris = append(uris, u.String())
	}
	return uris, nil
}

// Resolve looks a name up from the shell pod (busybox nslookup, through
// its resolv.conf, so through the agent when DNS is captured) and returns
// the addresses in the answer.
func (c *Cluster) Resolve(ctx context.Context, shell *corev1.Pod, name string) ([]string, error) {
	out, err := c.Kube.Exec(ctx, DemoNamespace, shell.Name, "shell", "nslookup", name)
	if err != nil {
		return nil, err
	}
	var addrs []string
	answer := false
	for _, l := range Lines(out) {
		if strings.HasPrefix(l, "Name:") {
			answer = true
		}
		if answer && strings.HasPrefix(l, "Address:") {
			addrs = append(addrs, strings.TrimSpace(strings.TrimPrefix(l, "Address:")))
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("nslookup %s: no answer:\n%s", name, out)
	}
	return addrs, nil
}

// Split reads the client's report of how its calls were answered
// ("COUNT ANSWER" lines, then "COUNT failed" if any failed: the client
// then exits and the kubelet restarts it) and returns the first report
// without failures; after a minute, the last report and the log.
func (c *Cluster) Split(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var split map[string]int
	var logs string
	err := kubePoll(ctx, "a report of the client's calls without failures", func() (bool, error) {
		pod, err := c.OnePod(ctx, "client")
		if err != nil {
			return false, nil
		}
		if logs, err = c.Kube.Logs(ctx, DemoNamespace, pod.Name, "app"); err != nil {
			return false, nil
		}
		split = map[string]int{}
		for _, l := range Lines(logs) {
			n, answer, ok := strings.Cut(l, " ")
			if v, err := strconv.Atoi(n); ok && err == nil {
				split[answer] = v
			}
		}
		return len(split) > 0 && split["failed"] == 0, nil
	})
	if err != nil {
		return split, fmt.Errorf("%w; the client's log ends:\n%s", err, tail(logs, 2000))
	}
	return split, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Leftovers lists what names Skiff's charts could leave in the cluster
// after helm uninstall: webhook configurations, cluster roles and
// bindings, DaemonSets and Deployments in the Istio namespace, and pods.
func (c *Cluster) Leftovers(ctx context.Context) ([]string, error) {
	var out []string
	cs := c.Kube.Client
	mw, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range mw.Items {
		out = append(out, "MutatingWebhookConfiguration/"+o.Name)
	}
	vw, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range vw.Items {
		out = append(out, "ValidatingWebhookConfiguration/"+o.Name)
	}
	crs, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range crs.Items {
		if strings.Contains(o.Name, "istio") {
			out = append(out, "ClusterRole/"+o.Name)
		}
	}
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range crbs.Items {
		if strings.Contains(o.Name, "istio") {
			out = append(out, "ClusterRoleBinding/"+o.Name)
		}
	}
	pods, err := cs.CoreV1().Pods(IstioNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range pods.Items {
		out = append(out, "Pod/"+IstioNamespace+"/"+o.Name)
	}
	sort.Strings(out)
	return out, nil
}
