// Package injecttest makes pods as a cluster holds them: a plain
// Deployment pod run through the injector with the chart's defaults, then
// given the status a kubelet writes once its containers run. Tests and
// benchmarks use it where the size and shape of real pods matter.
package injecttest

import (
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
)

// Injector is an injector with the chart's default templates and values.
func Injector() (*inject.Injector, error) {
	cfg, err := inject.DefaultConfig()
	if err != nil {
		return nil, err
	}
	return inject.New(cfg, slog.New(slog.DiscardHandler))
}

// Spec describes one pod.
type Spec struct {
	Name, Namespace string
	// App is the app label and container name; ServiceAccount the pod's.
	App, ServiceAccount string
	// IP is the pod's address, HostIP its node's, Node the node's name.
	IP, HostIP, Node string
}

// Pod returns s's pod injected by in, with a running pod's status.
func Pod(in *inject.Injector, s Spec) (*corev1.Pod, error) {
	hash := "5d8f7c9b4"
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace,
			GenerateName: s.App + "-" + hash + "-",
			Labels:       map[string]string{"app": s.App, "version": "v1", "pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: s.App + "-" + hash, UID: types.UID("rs-" + s.App), Controller: new(true), BlockOwnerDeletion: new(true)}},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: s.ServiceAccount,
			NodeName:           s.Node,
			Containers: []corev1.Container{{
				Name: s.App, Image: "registry.example/" + s.App + ":1.4.2",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "PORT", Value: "8080"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(8080)}}},
			}},
		},
	}
	res, err := in.Inject(pod, s.Namespace)
	if err != nil {
		return nil, fmt.Errorf("inject %s/%s: %w", s.Namespace, s.Name, err)
	}
	if !res.Injected {
		return nil, fmt.Errorf("inject %s/%s: not injected: %s", s.Namespace, s.Name, res.Reason)
	}
	out := res.Pod
	out.Status = running(out, s)
	return out, nil
}

// running is the status a kubelet reports for a pod whose containers
// all started and are ready.
func running(p *corev1.Pod, s Spec) corev1.PodStatus {
	t := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	st := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    s.HostIP,
		HostIPs:   []corev1.HostIP{{IP: s.HostIP}},
		PodIP:     s.IP,
		PodIPs:    []corev1.PodIP{{IP: s.IP}},
		StartTime: &t,
		QOSClass:  corev1.PodQOSBurstable,
	}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized,
		corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: t})
	}
	id := func(name string) string { return fmt.Sprintf("containerd://%064x", len(p.Name)*7919+len(name)) }
	for _, c := range p.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + fmt.Sprintf("%064x", len(c.Image)), ContainerID: id(c.Name),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: t, FinishedAt: t, ContainerID: id(c.Name)}},
			Ready: true, Started: new(false),
		})
	}
	for _, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + fmt.Sprintf("%064x", len(c.Image)), ContainerID: id(c.Name),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
			Ready: true, Started: new(true),
		})
	}
	return st
}
