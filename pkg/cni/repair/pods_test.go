package repair_test

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/cni/repair"
)

// pod is an injected pod (sidecar annotation, istio-validation init
// container) on node, changed by each option.
func pod(ns, name, node string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, Labels: map[string]string{"app": name},
			Annotations: map[string]string{repair.DefaultSidecarAnnotation: `{"initContainers":["istio-validation"]}`},
		},
		Spec: corev1.PodSpec{
			NodeName:       node,
			InitContainers: []corev1.Container{{Name: repair.DefaultInitContainerName, Image: "proxyv2"}},
			Containers:     []corev1.Container{{Name: "app", Image: "app"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func terminated(code int32, msg string) *corev1.ContainerStateTerminated {
	reason := "Error"
	if code == 0 {
		reason = "Completed"
	}
	return &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}
}

// crashLooping: the validation container failed with code and waits to restart.
func crashLooping(code int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
			Name:                 repair.DefaultInitContainerName,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: terminated(code, "")},
			RestartCount:         1,
		}}
	}
}

// failedOnce: the validation container's current (only) run failed with code.
func failedOnce(code int32, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
			Name: repair.DefaultInitContainerName, State: corev1.ContainerState{Terminated: terminated(code, msg)},
		}}
	}
}

// passed: the validation container succeeded (after an earlier failure).
func passed(p *corev1.Pod) {
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name:                 repair.DefaultInitContainerName,
		State:                corev1.ContainerState{Terminated: terminated(0, "")},
		LastTerminationState: corev1.ContainerState{Terminated: terminated(126, "")},
	}}
}

// noValidation: not injected in CNI mode, an istio-init that failed with 126.
func noValidation(p *corev1.Pod) {
	p.Spec.InitContainers[0].Name = "istio-init"
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name: "istio-init", State: corev1.ContainerState{Terminated: terminated(126, "")},
	}}
}

func notInjected(p *corev1.Pod) { p.Annotations = nil }
