package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckInjectorFollowsConfigMap edits the injector's ConfigMap (the
// proxy's log level in its values) and dry-runs a pod creation until the
// injected istio-proxy carries the new level: istiod follows the
// ConfigMap through the API, not the kubelet's slow refresh of the mounted
// file. The edit is then undone.
func (c *Cluster) CheckInjectorFollowsConfigMap(ctx context.Context) error {
	cms := c.Kube.Client.CoreV1().ConfigMaps(IstioNamespace)
	cm, err := cms.Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		return err
	}
	orig := cm.Data["values"]
	var values map[string]any
	if err := json.Unmarshal([]byte(orig), &values); err != nil {
		return fmt.Errorf("injector values: %w", err)
	}
	proxy, _ := values["global"].(map[string]any)["proxy"].(map[string]any)
	if proxy == nil {
		return fmt.Errorf("injector values have no global.proxy")
	}
	proxy["logLevel"] = "debug"
	b, err := json.Marshal(values)
	if err != nil {
		return err
	}
	cm.Data["values"] = string(b)
	start := time.Now()
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	defer func() {
		if cm, err := cms.Get(ctx, "istio-sidecar-injector", metav1.GetOptions{}); err == nil {
			cm.Data["values"] = orig
			_, _ = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
	}()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "configmap-probe", Namespace: DemoNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shell", Image: "docker.io/skiff-mesh/shell:latest"}}}}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = kubePoll(wctx, "a pod injected with the new log level", func() (bool, error) {
		got, err := c.Kube.Client.CoreV1().Pods(DemoNamespace).Create(wctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		for _, ctr := range got.Spec.Containers {
			if ctr.Name == "istio-proxy" && slices.Contains(ctr.Args, "--proxyLogLevel=debug") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	c.Say("the injector applied an edit of its ConfigMap in %s", time.Since(start).Round(10*time.Millisecond))
	return nil
}
