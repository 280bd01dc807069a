package repair

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Component is the event source the controller reports as, Istio's.
const Component = "cni-repair"

// Kube changes pods through the API server.
type Kube struct {
	Client rest.Interface // core/v1 (kuberest.NewCore)
}

var _ Pods = Kube{}

// Delete deletes pod with preconditions on its UID and resource version,
// so a pod recreated under the same name, or changed since it was judged,
// is left alone. A pod already gone is not an error.
func (k Kube) Delete(ctx context.Context, pod *corev1.Pod) error {
	err := k.Client.Delete().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).Body(&metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion},
	}).Do(ctx).Error()
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
	return k.Client.Patch(types.MergePatchType).Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SubResource("status").Body(patch).Do(ctx).Error()
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
	return k.Client.Post().Namespace(pod.Namespace).Resource("events").Body(ev).Do(ctx).Error()
}
