package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FailureSteps are what a real cluster does to the mesh: istiod down while
// a pod is created, and the CNI DaemonSet restarted while pods start.
func FailureSteps(mode Mode) []Step {
	steps := []Step{{"istiod down", (*Cluster).CheckIstiodDown, true}}
	if mode == CNIMode {
		steps = append(steps, Step{"cni restart", (*Cluster).CheckCNIRestart, true}, Step{"race repair", (*Cluster).CheckRaceRepair, true},
			Step{"race repair (label)", (*Cluster).CheckRaceRepairLabel, true})
	}
	return steps
}

// scale sets a Deployment's replicas.
func (c *Cluster) scale(ctx context.Context, ns, name string, n int32) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	_, err := c.Kube.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// CheckIstiodDown stops istiod and creates a pod in the labelled
// namespace: the injection webhook's failurePolicy (Fail, as Istio's)
// refuses it rather than letting it start without a sidecar. Once istiod
// is back the same pod is admitted with a sidecar.
func (c *Cluster) CheckIstiodDown(ctx context.Context) error {
	if err := c.scale(ctx, IstioNamespace, "istiod", 0); err != nil {
		return err
	}
	if err := kubePoll(ctx, "istiod gone", func() (bool, error) {
		pods, err := c.Pods(ctx, IstioNamespace, "app=istiod")
		return err == nil && len(pods) == 0, nil
	}); err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "while-istiod-down", Namespace: DemoNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shell", Image: "docker.io/skiff-mesh/shell:latest", Command: []string{"sleep", "86400"}}}}}
	_, err := c.Kube.Client.CoreV1().Pods(DemoNamespace).Create(ctx, pod, metav1.CreateOptions{})
	var errs []error
	switch {
	case err == nil:
		errs = append(errs, errors.New("a pod was admitted in a labelled namespace with istiod down (no sidecar)"))
		_ = c.Kube.Client.CoreV1().Pods(DemoNamespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	case strings.Contains(err.Error(), "failed calling webhook"):
		c.Say("with istiod down, creating a pod in namespace demo is refused:\n  %v", err)
	default:
		errs = append(errs, fmt.Errorf("creating a pod with istiod down: %w, want the webhook's refusal", err))
	}
	if err := c.scale(ctx, IstioNamespace, "istiod", 1); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := c.WaitDeployments(ctx, IstioNamespace); err != nil {
		return errors.Join(append(errs, err)...)
	}
	// The webhook answers once istiod's endpoint is in place; until then
	// the API server keeps refusing.
	err = kubePoll(ctx, "the pod admitted once istiod is back", func() (bool, error) {
		got, err := c.Kube.Client.CoreV1().Pods(DemoNamespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return apierrors.IsAlreadyExists(err), nil
		}
		if len(got.Spec.Containers) < 2 {
			return false, fmt.Errorf("pod admitted without a sidecar: %v", Shape(got.Spec))
		}
		return true, nil
	})
	if err == nil {
		c.Say("istiod back: the same pod is admitted, injected")
	}
	_ = c.Kube.Client.CoreV1().Pods(DemoNamespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	return errors.Join(append(errs, err)...)
}

// CheckCNIRestart deletes the istio-cni pod and starts shell pods at once:
// a pod that starts while the plugin is out of the node's conflist has no
// capture, its istio-validation container fails, and the repair controller
// deletes it, so every shell pod that runs in the end has capture and none
// is stuck.
func (c *Cluster) CheckCNIRestart(ctx context.Context) error {
	cni, err := c.Pods(ctx, IstioNamespace, "app=istio-cni-node")
	if err != nil || len(cni) != 1 {
		return fmt.Errorf("istio-cni pods: %d (%v), want 1", len(cni), err)
	}
	if err := c.Kube.Client.CoreV1().Pods(IstioNamespace).Delete(ctx, cni[0].Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := c.scale(ctx, DemoNamespace, "shell", 3); err != nil {
		return err
	}
	var shells []corev1.Pod
	err = kubePoll(ctx, "3 shell pods running with capture", func() (bool, error) {
		pods, err := c.Pods(ctx, DemoNamespace, "app=shell")
		if err != nil {
			return false, nil
		}
		shells = shells[:0]
		for _, p := range pods {
			if p.DeletionTimestamp == nil && containerRunning(&p, "shell") {
				shells = append(shells, p)
			}
		}
		return len(shells) == 3, nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for i := range shells {
		rules, err := c.CaptureRules(ctx, &shells[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !strings.Contains(rules, "--to-ports 15053") {
			errs = append(errs, fmt.Errorf("shell pod %s runs without capture", shells[i].Name))
		}
	}
	ev, _ := c.Kube.Client.CoreV1().Events(DemoNamespace).List(ctx, metav1.ListOptions{})
	repaired := 0
	for _, e := range ev.Items {
		if e.Source.Component == "istio-cni" || strings.Contains(strings.ToLower(e.Reason), "repair") {
			repaired++
		}
	}
	c.Say("after an istio-cni restart while 2 shell pods started: 3 run, all captured (%d repair events)", repaired)
	if err := c.scale(ctx, DemoNamespace, "shell", 1); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
