package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// injectionWithin bounds how long after `helm install --wait` returns the
// injection webhook may refuse pods, and a new namespace may lack the root
// certificate its sidecars mount: istiod patches its caBundle and publishes
// the root within moments, even when an uninstalled istiod left its Lease
// behind.
const injectionWithin = 10 * time.Second

// CheckInjectionAtOnce creates a namespace labelled for injection right
// after the install, and (dry run) a pod in it: the injector must admit
// and inject it, and istiod publish istio-ca-root-cert into the namespace,
// each within injectionWithin. After an uninstall (the second mode's
// install) the old istiod's Lease is still held, as helm deletes its RBAC
// before the pod can release it, so this fails if either waits for it.
func (c *Cluster) CheckInjectionAtOnce(ctx context.Context) error {
	const ns = "injection-check"
	nss := c.Kube.Client.CoreV1().Namespaces()
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"istio-injection": "enabled"}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() { _ = nss.Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shell", Image: "docker.io/skiff-mesh/shell:latest"}}}}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, injectionWithin)
	defer cancel()
	var last error
	err := kubePoll(wctx, "a pod admitted and injected", func() (bool, error) {
		got, err := c.Kube.Client.CoreV1().Pods(ns).Create(wctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err
			return false, nil
		}
		for _, ctr := range got.Spec.Containers {
			if ctr.Name == "istio-proxy" {
				return true, nil
			}
		}
		last = fmt.Errorf("admitted without istio-proxy: %v", got.Spec.Containers)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w; last refusal: %v", err, last)
	}
	c.Say("a pod was admitted and injected %s after the install returned", time.Since(start).Round(time.Millisecond))
	err = kubePoll(wctx, "istio-ca-root-cert published into the new namespace", func() (bool, error) {
		_, err := c.Kube.Client.CoreV1().ConfigMaps(ns).Get(wctx, "istio-ca-root-cert", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	c.Say("istio-ca-root-cert was in the new namespace %s after the install returned", time.Since(start).Round(time.Millisecond))
	return nil
}
