package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// trimPod is the pod informer's transform: of a pod it keeps what istiod
// reads, its metadata (name, labels and annotations, for identity,
// endpoint labels and the analysers), its service account and node, and
// its phase and addresses. The rest, an injected pod's containers,
// volumes and container statuses, is most of each object and is never
// read. TestTrimKeepsWhatIstiodReads holds this list to what the model
// and the analysers use.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a deleted-final-state tombstone
	}
	t := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	t.ManagedFields = nil
	t.Spec.ServiceAccountName = p.Spec.ServiceAccountName
	t.Spec.NodeName = p.Spec.NodeName
	t.Spec.HostNetwork = p.Spec.HostNetwork
	t.Status.Phase = p.Status.Phase
	t.Status.PodIP = p.Status.PodIP
	t.Status.PodIPs = p.Status.PodIPs
	t.Status.HostIP = p.Status.HostIP
	return t, nil
}

// sameTrimmedPod reports whether two cached (trimmed) versions of a pod
// hold the same values apart from their resourceVersion: an update istiod
// need not rebuild for, such as a container's restart count.
func sameTrimmedPod(a, b any) bool {
	pa, ok1 := a.(*corev1.Pod)
	pb, ok2 := b.(*corev1.Pod)
	if !ok1 || !ok2 {
		return false
	}
	x, y := *pa, *pb
	x.ResourceVersion, y.ResourceVersion = "", ""
	return equality.Semantic.DeepEqual(&x, &y)
}
