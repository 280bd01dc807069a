package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/kubenode"
)

// ExternalHost is a name outside the cluster: CoreDNS answers it, and
// the agent forwards to CoreDNS. Give it to the node (kubenode.Options.Hosts).
var ExternalHost = kubenode.HostEntry{IP: "10.250.0.77", Name: "api.external.test"}

// Step is one thing the flow does or checks; it says what it saw.
type Step struct {
	Name string
	Run  func(c *Cluster, ctx context.Context) error
	// Then says whether later steps can run after this one failed.
	Then bool
}

// Steps is the whole flow for one interception mode: install, deploy,
// check, and uninstall while the pods still run.
func Steps(mode Mode) []Step {
	steps := []Step{
		{"install", func(c *Cluster, ctx context.Context) error { return c.InstallIstio(ctx, mode) }, false},
		{"injection at once", (*Cluster).CheckInjectionAtOnce, true},
		{"deploy", func(c *Cluster, ctx context.Context) error { return c.DeployDemo(ctx, mode) }, false},
		{"validation", (*Cluster).CheckValidation, true},
		{"injector configmap", (*Cluster).CheckInjectorFollowsConfigMap, true},
		{"injection", func(c *Cluster, ctx context.Context) error { return c.CheckInjection(ctx, mode) }, true},
		{"capture", func(c *Cluster, ctx context.Context) error { return c.CheckCapture(ctx, mode) }, true},
		{"identities", (*Cluster).CheckIdentities, true},
		{"split", (*Cluster).CheckSplit, true},
		{"proxy-status", (*Cluster).CheckProxyStatus, true},
		{"proxy-config secret", (*Cluster).CheckProxySecret, true},
	}
	if mode == InitMode {
		steps = append(steps, Step{"dns", (*Cluster).CheckDNS, true})
	}
	steps = append(steps, FailureSteps(mode)...)
	return append(steps, []Step{
		{"uninstall", func(c *Cluster, ctx context.Context) error { return c.UninstallIstio(ctx, mode) }, false},
		{"nothing left", (*Cluster).CheckClean, true},
		{"delete demo", (*Cluster).DeleteDemo, false},
	}...)
}

// CheckInjection compares the shell's pod template with its pod, and
// checks a grpc-agent pod.
func (c *Cluster) CheckInjection(ctx context.Context, mode Mode) error {
	d, err := c.Kube.Client.AppsV1().Deployments(DemoNamespace).Get(ctx, "shell", metav1.GetOptions{})
	if err != nil {
		return err
	}
	shell, err := c.OnePod(ctx, "shell")
	if err != nil {
		return err
	}
	s := Shape(shell.Spec)
	c.Say("the shell pod before injection (its Deployment's template):\n  %s\nand after (%s):\n  %s", Shape(d.Spec.Template.Spec), mode, s)
	var errs []error
	wantInit := "istio-init (skiff-mesh/proxyv2:latest) +NET_ADMIN,NET_RAW"
	if mode == CNIMode {
		wantInit = "istio-validation (skiff-mesh/proxyv2:latest)"
	}
	if len(s.InitContainers) != 1 || s.InitContainers[0] != wantInit {
		errs = append(errs, fmt.Errorf("shell init containers %v, want [%s]", s.InitContainers, wantInit))
	}
	if !slices.ContainsFunc(s.Containers, func(n string) bool { return strings.HasPrefix(n, "istio-proxy ") }) {
		errs = append(errs, fmt.Errorf("shell containers %v: no istio-proxy", s.Containers))
	}
	pods, err := c.Pods(ctx, DemoNamespace, "app=reviews,version=v1")
	if err != nil || len(pods) != 1 {
		return errors.Join(append(errs, fmt.Errorf("reviews-v1: %d pods (%v), want 1", len(pods), err))...)
	}
	rs := Shape(pods[0].Spec)
	c.Say("a grpc-agent pod (reviews-v1) after injection:\n  %s", rs)
	if len(rs.InitContainers) != 0 {
		errs = append(errs, fmt.Errorf("grpc-agent pod has init containers %v", rs.InitContainers))
	}
	for _, ctr := range pods[0].Spec.Containers {
		if ctr.Name != "app" {
			continue
		}
		if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
			return e.Name == "GRPC_XDS_BOOTSTRAP" && e.Value == "/etc/istio/proxy/grpc-bootstrap.json"
		}) {
			errs = append(errs, fmt.Errorf("grpc-agent app container lacks GRPC_XDS_BOOTSTRAP"))
		}
	}
	return errors.Join(errs...)
}

// CheckCapture reads the shell pod's rules from the node: istio-init or
// the CNI plugin put DNS capture there.
func (c *Cluster) CheckCapture(ctx context.Context, mode Mode) error {
	shell, err := c.OnePod(ctx, "shell")
	if err != nil {
		return err
	}
	rules, err := c.CaptureRules(ctx, shell)
	if err != nil {
		return err
	}
	c.Say("iptables-save in the shell pod's network namespace (installed by %s):\n%s", mode, rules)
	var errs []error
	if mode == CNIMode {
		// The plugin reads its pods from install-cni's cache, not the API
		// server: one file per pod of the node.
		dir := filepath.Join("/var/run/istio-cni", cni.PodCacheDir)
		want := filepath.Base(cni.PodFile(dir, shell.Namespace, shell.Name))
		if files, err := c.NodeDir(ctx, dir); err != nil || !slices.Contains(files, want) {
			errs = append(errs, fmt.Errorf("no pod cache file %s in %s: %v %v", want, dir, files, err))
		}
		// The plugin trusts the files only while install-cni, in its
		// container, holds their owner lock; seen from the node, where the
		// plugin runs, a shared lock cannot be taken.
		_, err := c.Node.Exec(ctx, "flock", "--nonblock", "--shared", "--conflict-exit-code", "75", filepath.Join(dir, cni.PodCacheOwner), "true")
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 75 {
			errs = append(errs, fmt.Errorf("the pod cache's owner lock is not held as seen from the node, so the plugin would not use its files: flock: %v", err))
		}
		// What the plugin logged for the pod is in install-cni's log, as
		// in Istio's (kubectl logs istio-cni-node-…).
		if err := c.pluginLogged(ctx, shell); err != nil {
			errs = append(errs, err)
		}
		// Its API-server helper is installed beside it, for the pods the
		// cache cannot answer.
		if bins, err := c.NodeDir(ctx, kubenode.CNIBinDir); err != nil || !slices.Contains(bins, "istio-cni") || !slices.Contains(bins, cni.LookupBinary) {
			errs = append(errs, fmt.Errorf("want istio-cni and %s in %s: %v %v", cni.LookupBinary, kubenode.CNIBinDir, bins, err))
		}
	}
	for _, re := range []string{
		`-A ISTIO_OUTPUT_DNS (-d \S+ )?-p udp -m udp --dport 53 -j REDIRECT --to-ports 15053`,
		`-A OUTPUT (-p udp )?-j ISTIO_OUTPUT_DNS`,
	} {
		if !regexp.MustCompile(re).MatchString(rules) {
			errs = append(errs, fmt.Errorf("shell pod's rules lack %q", re))
		}
	}
	return errors.Join(errs...)
}

// CheckIdentities reads each proxyless pod's certificate: istiod's CA
// signed it for the pod's service account, having checked the pod's
// projected token with a TokenReview.
func (c *Cluster) CheckIdentities(ctx context.Context) error {
	var errs []error
	for _, sel := range []string{"app=reviews", "app=client"} {
		pods, err := c.Pods(ctx, DemoNamespace, sel)
		if err != nil {
			return err
		}
		for i := range pods {
			ids, err := c.Identity(ctx, &pods[i])
			if err != nil {
				errs = append(errs, err)
				continue
			}
			want := "spiffe://cluster.local/ns/demo/sa/" + pods[i].Spec.ServiceAccountName
			c.Say("%s's certificate: %v", pods[i].Name, ids)
			if len(ids) != 1 || ids[0] != want {
				errs = append(errs, fmt.Errorf("%s identity %v, want [%s]", pods[i].Name, ids, want))
			}
		}
	}
	return errors.Join(errs...)
}

// CheckDNS resolves a mesh name, a ServiceEntry name and an external name
// from the shell pod, whose DNS the agent answers.
func (c *Cluster) CheckDNS(ctx context.Context) error {
	shell, err := c.OnePod(ctx, "shell")
	if err != nil {
		return err
	}
	svc, err := c.Kube.Client.CoreV1().Services(DemoNamespace).Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range []struct{ name, want, what string }{
		{"reviews.demo.svc.cluster.local", svc.Spec.ClusterIP, "a mesh name"},
		{"api.example.com", "240.240.0.10", "a ServiceEntry: only the agent knows it"},
		{ExternalHost.Name, ExternalHost.IP, "outside the mesh: the agent forwards to CoreDNS"},
	} {
		addrs, err := c.Resolve(ctx, shell, q.name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.Say("nslookup %s in the shell pod (%s): %v", q.name, q.what, addrs)
		if !slices.Contains(addrs, q.want) {
			errs = append(errs, fmt.Errorf("%s resolved to %v, want %s", q.name, addrs, q.want))
		}
	}
	return errors.Join(errs...)
}

// CheckSplit reads the client's 200 calls: about 90/10 between v1 and v2,
// all over mTLS.
func (c *Cluster) CheckSplit(ctx context.Context) error {
	split, err := c.Split(ctx)
	if err != nil {
		return err
	}
	c.Say("the client's 200 calls to reviews: %v", split)
	var v1, v2, other int
	const peer = "(mTLS peer spiffe://cluster.local/ns/demo/sa/client)"
	for k, n := range split {
		if !strings.HasSuffix(k, peer) {
			other += n
			continue
		}
		switch {
		case strings.HasPrefix(k, "v1"):
			v1 += n
		case strings.HasPrefix(k, "v2"):
			v2 += n
		default:
			other += n
		}
	}
	if v1+v2 != 200 || other != 0 {
		return fmt.Errorf("split %v: want 200 answers from v1 and v2, each seeing the client's certificate %s", split, peer)
	}
	if v2 < 5 || v2 > 45 {
		return fmt.Errorf("v2 answered %d of 200, want about 20 (90/10)", v2)
	}
	return nil
}

// CheckClean checks what helm uninstall left: no webhook configuration,
// cluster role or istio pod, the node's conflist byte for byte as before
// and no istio-cni binary or its helper.
func (c *Cluster) CheckClean(ctx context.Context) error {
	var errs []error
	// helm uninstall --wait returns when the objects are deleted; their
	// pods still end (within their grace period).
	var left []string
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = kubePoll(wctx, "nothing left", func() (bool, error) {
		var err error
		left, err = c.Leftovers(ctx)
		return err == nil && len(left) == 0, nil
	})
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("left after helm uninstall: %v", left))
	}
	after, err := c.NodeFile(ctx, filepath.Join(kubenode.CNIConfDir, kubenode.ConflistName))
	if err != nil {
		return err
	}
	if after != c.conflist {
		errs = append(errs, fmt.Errorf("node conflist after uninstall:\n%s\nwant it as before:\n%s", after, c.conflist))
	} else {
		c.Say("the node's conflist is byte for byte as before")
	}
	if bins, _ := c.NodeDir(ctx, kubenode.CNIBinDir); slices.Contains(bins, "istio-cni") || slices.Contains(bins, cni.LookupBinary) {
		errs = append(errs, fmt.Errorf("%s still has istio-cni or %s: %v", kubenode.CNIBinDir, cni.LookupBinary, bins))
	}
	return errors.Join(errs...)
}

// pluginLogged checks that install-cni printed the plugin's record of
// capturing pod, with the plugin's scope.
func (c *Cluster) pluginLogged(ctx context.Context, pod *corev1.Pod) error {
	lines, err := c.PluginLog(ctx, "traffic capture installed")
	if err != nil {
		return err
	}
	for _, l := range lines {
		if strings.Contains(l, "pod="+pod.Namespace+"/"+pod.Name) {
			c.Say("install-cni's log has the plugin's record: %s", l)
			return nil
		}
	}
	return fmt.Errorf("install-cni's log has no record of the plugin capturing %s/%s: %q", pod.Namespace, pod.Name, lines)
}

// PluginLog returns the lines of install-cni's log that print the CNI
// plugin's records with message msg.
func (c *Cluster) PluginLog(ctx context.Context, msg string) ([]string, error) {
	cni, err := c.Pods(ctx, IstioNamespace, "app=istio-cni-node")
	if err != nil || len(cni) != 1 {
		return nil, fmt.Errorf("istio-cni pods: %d (%v), want 1", len(cni), err)
	}
	logs, err := c.Kube.Logs(ctx, IstioNamespace, cni[0].Name, "install-cni")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range Lines(logs) {
		if strings.Contains(l, fmt.Sprintf("msg=%q scope=cni-plugin", msg)) {
			out = append(out, l)
		}
	}
	return out, nil
}
