package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/kubenode"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// Mode is how pods' traffic is captured.
type Mode int

const (
	// InitMode captures with the istio-init container (NET_ADMIN).
	InitMode Mode = iota
	// CNIMode captures with the CNI plugin that the istio-cni DaemonSet chains in.
	CNIMode
)

func (m Mode) String() string {
	if m == CNIMode {
		return "cni"
	}
	return "istio-init"
}

// IstioNamespace is where the charts are installed.
const IstioNamespace = "istio-system"

// Cluster is a node with Skiff's images, ready for helm.
type Cluster struct {
	Node *kubenode.Node
	Kube *Kube
	// Root is the repository root: charts are in Root/manifests/charts.
	Root string
	helm string
	log  io.Writer
	// conflist is the node's CNI configuration before anything was installed.
	conflist string
}

// SetLog sends the flow's output to w.
func (c *Cluster) SetLog(w io.Writer) { c.log = w }

// Say prints a step of the flow.
func (c *Cluster) Say(format string, args ...any) {
	fmt.Fprintf(c.log, "\n== "+format+"\n", args...)
}

// New wraps a running node.
func New(node *kubenode.Node, root string, log io.Writer) (*Cluster, error) {
	assets, err := kubetest.AssetsDir()
	if err != nil {
		return nil, err
	}
	k, err := NewKube(node.Config)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	c := &Cluster{Node: node, Kube: k, Root: root, helm: filepath.Join(assets, "helm"), log: log}
	if c.conflist, err = c.NodeFile(context.Background(), filepath.Join(kubenode.CNIConfDir, kubenode.ConflistName)); err != nil {
		return nil, err
	}
	return c, nil
}

// Helm runs the helm binary against the cluster, as a user would, with
// its caches in the node's directory.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--kubeconfig", c.Node.Kubeconfig)
	cmd := exec.CommandContext(ctx, c.helm, args...)
	cmd.Dir = c.Root
	h := filepath.Join(c.Node.Dir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+h+"/cache", "HELM_CONFIG_HOME="+h+"/config", "HELM_DATA_HOME="+h+"/data")
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(c.log, "$ helm %s\n", strings.Join(args[:len(args)-2], " "))
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// InstallIstio installs the charts in Istio's order (base, then istio-cni
// in CNI mode, then istiod) and waits for them.
func (c *Cluster) InstallIstio(ctx context.Context, mode Mode) error {
	charts := filepath.Join("manifests", "charts")
	if _, err := c.Helm(ctx, "install", "istio-base", filepath.Join(charts, "base"), "-n", IstioNamespace, "--create-namespace", "--wait"); err != nil {
		return err
	}
	if mode == CNIMode {
		if _, err := c.Helm(ctx, "install", "istio-cni", filepath.Join(charts, "istio-cni"), "-n", IstioNamespace, "--wait"); err != nil {
			return err
		}
	}
	_, err := c.Helm(ctx, "install", "istiod", filepath.Join(charts, "istiod"), "-n", IstioNamespace,
		"--set", fmt.Sprintf("pilot.cni.enabled=%t", mode == CNIMode), "--wait")
	return err
}

// UninstallIstio removes the releases in the reverse order.
func (c *Cluster) UninstallIstio(ctx context.Context, mode Mode) error {
	rels := []string{"istiod", "istio-base"}
	if mode == CNIMode {
		rels = []string{"istiod", "istio-cni", "istio-base"}
	}
	for _, r := range rels {
		if _, err := c.Helm(ctx, "uninstall", r, "-n", IstioNamespace, "--wait"); err != nil {
			return err
		}
	}
	return nil
}

// WaitDeployments waits until every Deployment in ns has all its replicas
// updated and available.
func (c *Cluster) WaitDeployments(ctx context.Context, ns string) error {
	return kubePoll(ctx, "deployments in "+ns+" available", func() (bool, error) {
		ds, err := c.Kube.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, d := range ds.Items {
			if !available(&d) {
				return false, nil
			}
		}
		return len(ds.Items) > 0, nil
	})
}

func available(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}

// Pods returns the pods of ns matching a label selector.
func (c *Cluster) Pods(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
	l, err := c.Kube.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func kubePoll(ctx context.Context, what string, check func() (bool, error)) error {
	return kubenode.Poll(ctx, what, check)
}
