package repair

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Component is the event source the controller reports as, Istio's.
const Component = "cni-repair"

// Kube changes pods through the API server.
type Kube struct {
	Client kubernetes.Interface
}

var _ Pods = Kube{}

// Delete deletes pod with preconditions on its UID and resource version,
// so a pod recreated under the same name, or changed since it was judged,
// is left alone. A pod already gone is not an error.
func (k Kube) Delete(ctx context.Context, pod *corev1.Pod) error {
	err := k.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Label merge-patches the label through the pods/status subresource,
// which needs less privilege than the pod itself, as Istio does.
func (k Kube) Label(ctx context.Context, pod *corev1.Pod, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	if err != nil {
		return fmt.Errorf("label patch: %w", err)
	}
	_, err = k.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// Event creates a Warning event on pod from Component.
func (k Kube) Event(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
		Reason: reason, Message: message, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: Component, Host: pod.Spec.NodeName},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: Component, ReportingInstance: Component + "-" + pod.Spec.NodeName,
	}
	_, err := k.Client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
