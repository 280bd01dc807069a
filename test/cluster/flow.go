package cluster

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

//go:embed demo.yaml
var demoTemplate string

// DemoManifest is the demo mesh (demo.yaml) for a mode.
func DemoManifest(mode Mode) ([]byte, error) {
	t, err := template.New("demo.yaml").Parse(demoTemplate)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, struct{ CNI bool }{mode == CNIMode})
	return b.Bytes(), err
}

// DemoApps are the demo's Deployments that must become available (the
// shell's istio-proxy has no Envoy to run here, so it never reports
// ready: its agent and DNS proxy run, which is what the shell uses).
var DemoApps = []string{"reviews-v1", "reviews-v2", "client"}

// DeployDemo applies the demo mesh and waits for its apps and for the
// shell container to run.
func (c *Cluster) DeployDemo(ctx context.Context, mode Mode) error {
	m, err := DemoManifest(mode)
	if err != nil {
		return err
	}
	if err := c.Kube.Apply(ctx, m); err != nil {
		return err
	}
	return kubePoll(ctx, "the demo's pods", func() (bool, error) {
		for _, app := range DemoApps {
			d, err := c.Kube.Client.AppsV1().Deployments(DemoNamespace).Get(ctx, app, metav1.GetOptions{})
			if err != nil || !available(d) {
				return false, nil
			}
		}
		shell, err := c.OnePod(ctx, "shell")
		if err != nil {
			return false, nil
		}
		return containerRunning(shell, "shell") && (mode == CNIMode || containerRunning(shell, "istio-proxy")), nil
	})
}

func containerRunning(p *corev1.Pod, name string) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s.State.Running != nil
		}
	}
	return false
}

// DeleteDemo deletes the demo namespace and waits until it is gone.
func (c *Cluster) DeleteDemo(ctx context.Context) error {
	err := c.Kube.Client.CoreV1().Namespaces().Delete(ctx, DemoNamespace, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return kubePoll(ctx, "namespace demo gone", func() (bool, error) {
		_, err := c.Kube.Client.CoreV1().Namespaces().Get(ctx, DemoNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// NodeFile reads a file on the node.
func (c *Cluster) NodeFile(ctx context.Context, path string) (string, error) {
	b, err := c.Node.Exec(ctx, "cat", path)
	return string(b), err
}

// NodeDir lists a directory on the node.
func (c *Cluster) NodeDir(ctx context.Context, path string) ([]string, error) {
	b, err := c.Node.Exec(ctx, "ls", "-1", path)
	if err != nil {
		return nil, err
	}
	return Lines(string(b)), nil
}

// IstiodLog returns the log of istiod's running pod.
func (c *Cluster) IstiodLog(ctx context.Context) (string, error) {
	pods, err := c.Pods(ctx, IstioNamespace, "app=istiod")
	if err != nil {
		return "", err
	}
	if len(pods) == 0 {
		return "", fmt.Errorf("no istiod pod")
	}
	return c.Kube.Logs(ctx, IstioNamespace, pods[0].Name, "discovery")
}

// Summary is one line per container: what injection added.
func (s PodShape) String() string {
	return fmt.Sprintf("initContainers: [%s]\n  containers: [%s]", strings.Join(s.InitContainers, ", "), strings.Join(s.Containers, ", "))
}
