package kube

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
)

// cachedPod is what the pod informer keeps of a pod: the metadata client-go
// keys its store by, and what istiod reads (model.Pod). A pod that fails
// validation is kept with its problem, which is reported when the pods are
// listed. At a pod per endpoint this is a few hundred bytes a pod, where the
// object as served (spec, status, the injector's annotations) is several
// kilobytes.
type cachedPod struct {
	metav1.ObjectMeta // name, namespace and resourceVersion only
	pod               model.Pod
	invalid           error
}

// trimPod is the pod informer's transform.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a deleted-final-state tombstone, or already trimmed
	}
	return &cachedPod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion},
		pod:        *model.PodOf(p),
		invalid:    validation.Accept(p),
	}, nil
}

// sameTrimmedPod reports whether two cached versions of a pod hold the same
// values apart from their resourceVersion: an update istiod need not rebuild
// for, such as a container's restart count.
func sameTrimmedPod(a, b any) bool {
	x, ok1 := a.(*cachedPod)
	y, ok2 := b.(*cachedPod)
	if !ok1 || !ok2 {
		return false
	}
	p, q := &x.pod, &y.pod
	return p.Name == q.Name && p.Namespace == q.Namespace && p.ServiceAccount == q.ServiceAccount &&
		p.Templates == q.Templates && maps.Equal(p.Labels, q.Labels) && slices.Equal(p.IPs, q.IPs) &&
		errText(x.invalid) == errText(y.invalid)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
