package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-mesh/skiff/pkg/kubenode"
)

// CheckRaceRepair starts a pod while the CNI plugin is not on the node
// (the DaemonSet moved off it: install-cni takes the plugin out of the
// node's conflist as it stops). The pod has no capture, so its
// istio-validation init container fails with 126; once the DaemonSet is
// back, its repair controller deletes the pod and the replacement starts
// with capture.
func (c *Cluster) CheckRaceRepair(ctx context.Context) error {
	broken, err := c.startWithoutPlugin(ctx)
	if err != nil {
		return err
	}
	if err := c.pluginBack(ctx); err != nil {
		return err
	}
	var errs []error
	err = kubePoll(ctx, "the broken pod repaired: deleted, its replacement captured", func() (bool, error) {
		if _, err := c.Kube.Client.CoreV1().Pods(DemoNamespace).Get(ctx, broken.Name, metav1.GetOptions{}); err == nil {
			return false, nil
		}
		return c.runningShells(ctx) == 2, nil
	})
	if err != nil {
		return err
	}
	pods, _ := c.Pods(ctx, DemoNamespace, "app=shell")
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		rules, err := c.CaptureRules(ctx, &pods[i])
		if err == nil && !strings.Contains(rules, "--to-ports 15053") {
			err = fmt.Errorf("shell pod %s runs without capture", pods[i].Name)
		}
		errs = append(errs, err)
	}
	c.Say("istio-cni back: %s", c.event(ctx, broken.Name, "DeleteBrokenPod"))
	errs = append(errs, c.scale(ctx, DemoNamespace, "shell", 1))
	return errors.Join(errs...)
}

// CheckRaceRepairLabel is the race again with the repair controller set
// to label broken pods (helm upgrade --set repair.labelPods=true): the
// pod is kept and labelled cni.istio.io/uninitialized=true.
func (c *Cluster) CheckRaceRepairLabel(ctx context.Context) error {
	if _, err := c.Helm(ctx, "upgrade", "istio-cni", "manifests/charts/istio-cni", "-n", IstioNamespace, "--reuse-values",
		"--set", "repair.labelPods=true", "--set", "repair.repairPods=false", "--set", "repair.deletePods=false", "--wait"); err != nil {
		return err
	}
	broken, err := c.startWithoutPlugin(ctx)
	if err != nil {
		return err
	}
	if err := c.pluginBack(ctx); err != nil {
		return err
	}
	err = kubePoll(ctx, "the broken pod labelled cni.istio.io/uninitialized=true", func() (bool, error) {
		p, err := c.Kube.Client.CoreV1().Pods(DemoNamespace).Get(ctx, broken.Name, metav1.GetOptions{})
		return err == nil && p.Labels["cni.istio.io/uninitialized"] == "true", nil
	})
	if err != nil {
		return err
	}
	c.Say("with repair.labelPods: %s", c.event(ctx, broken.Name, "LabelBrokenPod"))
	return errors.Join(
		c.scale(ctx, DemoNamespace, "shell", 1),
		c.Kube.Client.CoreV1().Pods(DemoNamespace).Delete(ctx, broken.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}),
	)
}

// startWithoutPlugin moves the istio-cni DaemonSet off the node (its
// install-cni takes the plugin out of the conflist as it stops) and scales
// the shell to 2: the new pod's istio-validation fails with 126.
func (c *Cluster) startWithoutPlugin(ctx context.Context) (*corev1.Pod, error) {
	away := `{"spec":{"template":{"spec":{"nodeSelector":{"skiff.test/no-node":"x"}}}}}`
	if _, err := c.Kube.Client.AppsV1().DaemonSets(IstioNamespace).Patch(ctx, "istio-cni-node", types.StrategicMergePatchType, []byte(away), metav1.PatchOptions{}); err != nil {
		return nil, err
	}
	conflist := filepath.Join(kubenode.CNIConfDir, kubenode.ConflistName)
	if err := kubePoll(ctx, "istio-cni off the node and out of its conflist", func() (bool, error) {
		pods, err := c.Pods(ctx, IstioNamespace, "app=istio-cni-node")
		if err != nil || len(pods) > 0 {
			return false, nil
		}
		f, err := c.NodeFile(ctx, conflist)
		return err == nil && !strings.Contains(f, "istio-cni"), nil
	}); err != nil {
		return nil, err
	}
	before, err := c.Pods(ctx, DemoNamespace, "app=shell")
	if err != nil {
		return nil, err
	}
	if err := c.scale(ctx, DemoNamespace, "shell", 2); err != nil {
		return nil, err
	}
	var broken corev1.Pod
	if err := kubePoll(ctx, "the new shell pod's istio-validation failing with 126", func() (bool, error) {
		pods, err := c.Pods(ctx, DemoNamespace, "app=shell")
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if !isIn(p.Name, before) && validationExit(&p) == 126 {
				broken = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return nil, err
	}
	c.Say("a shell pod started while istio-cni was off the node: %s, istio-validation exited 126 (no capture)", broken.Name)
	return &broken, nil
}

// pluginBack puts the DaemonSet back on the node.
func (c *Cluster) pluginBack(ctx context.Context) error {
	back := `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`
	_, err := c.Kube.Client.AppsV1().DaemonSets(IstioNamespace).Patch(ctx, "istio-cni-node", types.StrategicMergePatchType, []byte(back), metav1.PatchOptions{})
	return err
}

func (c *Cluster) runningShells(ctx context.Context) int {
	pods, err := c.Pods(ctx, DemoNamespace, "app=shell")
	if err != nil {
		return 0
	}
	running := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && containerRunning(&p, "shell") {
			running++
		}
	}
	return running
}

// event describes the repair controller's event about a pod.
func (c *Cluster) event(ctx context.Context, pod, reason string) string {
	ev, err := c.Kube.Client.CoreV1().Events(DemoNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err == nil {
		for _, e := range ev.Items {
			if e.Reason == reason {
				return fmt.Sprintf("%s %s: %s", e.Reason, pod, e.Message)
			}
		}
	}
	return fmt.Sprintf("no %s event for %s", reason, pod)
}

func isIn(name string, pods []corev1.Pod) bool {
	for _, p := range pods {
		if p.Name == name {
			return true
		}
	}
	return false
}

// validationExit is the exit code of the pod's istio-validation container's
// last run, or -1.
func validationExit(p *corev1.Pod) int32 {
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name != "istio-validation" {
			continue
		}
		if t := s.State.Terminated; t != nil {
			return t.ExitCode
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			return t.ExitCode
		}
	}
	return -1
}
