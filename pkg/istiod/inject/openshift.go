package inject

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// OpenShift's namespace annotations: the user ids and supplemental groups
// its security policy lets the namespace's pods run as.
const (
	uidRangeAnnotation           = "openshift.io/sa.scc.uid-range"
	supplementalGroupsAnnotation = "openshift.io/sa.scc.supplemental-groups"
)

// NamespaceAnnotations returns a namespace's annotations (false if the
// namespace is not known). The injector reads OpenShift's id ranges there.
type NamespaceAnnotations func(namespace string) (map[string]string, bool)

// SetNamespaces gives the injector a way to read namespaces' annotations;
// call it on OpenShift only (Istio reads namespaces only there), with a
// namespace lister. Without it, or for a namespace without OpenShift's
// annotations, the proxy runs as 1337:1337; with them as Istio runs it:
// the top of the uid range, and of the first supplemental group range (the
// uid range when there is none). With it, too, a pod's own istio-proxy
// runAsUser equal to its app's (OpenShift gives every container the same)
// is dropped, so the proxy's user differs from the app's and capture works.
func (in *Injector) SetNamespaces(f NamespaceAnnotations) {
	in.namespaces.Store(&f)
}

// proxyIDs are the proxy's user and group for pods of namespace ns.
func (in *Injector) proxyIDs(ns string) (uid, gid int64) {
	uid, gid = proxyID, proxyID
	f := in.namespaces.Load()
	if f == nil || *f == nil {
		return uid, gid
	}
	ann, ok := (*f)(ns)
	if !ok {
		return uid, gid
	}
	if r, ok := ann[uidRangeAnnotation]; ok {
		if _, end, err := parseIDBlock(r); err == nil {
			uid = end
		}
	}
	groups, ok := ann[supplementalGroupsAnnotation]
	if !ok {
		groups, ok = ann[uidRangeAnnotation]
	}
	if ok {
		first, _, _ := strings.Cut(groups, ",")
		if _, end, err := parseIDBlock(first); err == nil {
			gid = end
		}
	}
	return uid, gid
}

// parseIDBlock reads an OpenShift id block, START/SIZE or START-END,
// returning its first and last id.
func parseIDBlock(s string) (start, end int64, err error) {
	var a, b uint32
	if strings.Contains(s, "/") {
		if _, err := fmt.Sscanf(s, "%d/%d", &a, &b); err != nil || b == 0 {
			return 0, 0, fmt.Errorf("id block %q: want START/SIZE", s)
		}
		return int64(a), int64(a) + int64(b) - 1, nil
	}
	if _, err := fmt.Sscanf(s, "%d-%d", &a, &b); err != nil {
		return 0, 0, fmt.Errorf("id block %q: want START-END", s)
	}
	return int64(a), int64(b), nil
}

// resetAssignedUser drops the pod's own istio-proxy runAsUser and
// runAsGroup when the runAsUser equals the (last) app container's, as
// Istio does on OpenShift.
func (in *Injector) resetAssignedUser(pod *corev1.Pod) {
	if f := in.namespaces.Load(); f == nil || *f == nil {
		return
	}
	p := sidecar(pod)
	if p == nil || p.SecurityContext == nil {
		return
	}
	var proxyUser, appUser int64
	for _, c := range append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...) {
		if c.SecurityContext == nil || c.SecurityContext.RunAsUser == nil {
			continue
		}
		switch c.Name {
		case "istio-proxy":
			proxyUser = *c.SecurityContext.RunAsUser
		case "istio-init", "istio-validation":
		default:
			appUser = *c.SecurityContext.RunAsUser
		}
	}
	if proxyUser == appUser {
		p.SecurityContext.RunAsUser, p.SecurityContext.RunAsGroup = nil, nil
	}
}
