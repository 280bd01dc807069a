// Package inject is Skiff's sidecar injector: it decides whether a pod gets
// a sidecar (Istio's policy: the sidecar.istio.io/inject label or
// annotation, hostNetwork, already-injected pods, the policy and selectors
// of the injector's configuration) and, if so, renders the injection
// template (text/template, a file users can change, with values from the
// istio-sidecar-injector ConfigMap) and merges the result into the pod:
// istio-init (or istio-validation with the CNI plugin) running istio-iptables
// with the flags the traffic annotations ask for, istio-proxy running
// pilot-agent with the environment it reads, the app's probes rewritten to
// the agent's /app-health endpoints, the volumes, and the
// sidecar.istio.io/status annotation.
//
// The admission webhook (pkg/istiod/webhook) and istioctl kube-inject use
// the same Injector.
package inject
