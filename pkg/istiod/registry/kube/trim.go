package kube

import corev1 "k8s.io/api/core/v1"

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
