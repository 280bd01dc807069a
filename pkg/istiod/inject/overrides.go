package inject

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
)

// overrides is proxy.istio.io/overrides: the pod's own versions of
// containers the templates inject (the way users tune istio-proxy), kept
// so a later injection can apply them again.
type overrides struct {
	Containers     []corev1.Container `json:"containers,omitempty"`
	InitContainers []corev1.Container `json:"initContainers,omitempty"`
}

func find(cs []corev1.Container, name string) *corev1.Container {
	if i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == name }); i >= 0 {
		return &cs[i]
	}
	return nil
}

// nativeMove moves the pod's own istio-proxy from its containers to its
// init containers when the template injects a native sidecar, so the
// pod's settings still apply to it.
func nativeMove(pod *corev1.Pod, inits []corev1.Container) {
	if find(inits, "istio-proxy") == nil {
		return
	}
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == "istio-proxy" })
	if i < 0 || find(pod.Spec.InitContainers, "istio-proxy") != nil {
		return
	}
	c := pod.Spec.Containers[i]
	pod.Spec.Containers = slices.Delete(pod.Spec.Containers, i, i+1)
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
}

// recordOverrides sets proxy.istio.io/overrides on a first injection
// when the original pod had its own version of an injected container.
func recordOverrides(pod, orig *corev1.Pod, st *injected) error {
	if _, again := orig.Annotations[annotation.SidecarStatus.Name]; again {
		return nil
	}
	var o overrides
	own := func(c *corev1.Container) corev1.Container {
		cp := *c.DeepCopy()
		if cp.Image == "auto" {
			cp.Image = ""
		}
		return cp
	}
	for _, n := range st.Containers {
		if c := find(orig.Spec.Containers, n); c != nil {
			o.Containers = append(o.Containers, own(c))
		}
	}
	for _, n := range st.InitContainers {
		c := find(orig.Spec.InitContainers, n)
		if c == nil {
			c = find(orig.Spec.Containers, n)
		}
		if c != nil {
			o.InitContainers = append(o.InitContainers, own(c))
		}
	}
	if len(o.Containers)+len(o.InitContainers) == 0 {
		return nil
	}
	js, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("encode %s: %w", annotation.ProxyOverrides.Name, err)
	}
	pod.Annotations[annotation.ProxyOverrides.Name] = string(js)
	return nil
}

// adjustInitUser follows a pod's own istio-proxy runAsUser/runAsGroup,
// as Istio does: istio-validation runs as the proxy's user and group
// (not with TPROXY), iptables' -u names the proxy's user when it is not
// 0, and with TPROXY the proxy itself must run as 0.
func adjustInitUser(pod, orig *corev1.Pod, mode string) {
	user := sidecar(orig)
	if user == nil || user.SecurityContext == nil || (user.SecurityContext.RunAsUser == nil && user.SecurityContext.RunAsGroup == nil) {
		return
	}
	init := find(pod.Spec.InitContainers, "istio-init")
	if init == nil {
		init = find(pod.Spec.InitContainers, "istio-validation")
	}
	if init == nil {
		return
	}
	uid, gid := user.SecurityContext.RunAsUser, user.SecurityContext.RunAsGroup
	tproxy := mode == "TPROXY"
	if tproxy && uid != nil {
		if p := sidecar(pod); p != nil && p.SecurityContext != nil && p.SecurityContext.RunAsUser != nil {
			zero := int64(0)
			p.SecurityContext.RunAsUser = &zero
		}
	}
	if !tproxy && init.Name == "istio-validation" {
		if init.SecurityContext == nil {
			init.SecurityContext = &corev1.SecurityContext{}
		}
		if uid != nil {
			v := *uid
			init.SecurityContext.RunAsUser = &v
		}
		if gid != nil {
			v := *gid
			init.SecurityContext.RunAsGroup = &v
		}
	}
	if uid == nil || *uid == 0 {
		return
	}
	for i := 0; i+1 < len(init.Args); i++ {
		if init.Args[i] == "-u" {
			init.Args[i+1] = strconv.FormatInt(*uid, 10)
			return
		}
	}
}
