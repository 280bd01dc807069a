// Package inject is Skiff's sidecar injector: it decides whether a pod gets
// a sidecar (Istio's policy: the sidecar.istio.io/inject label or
// annotation, hostNetwork, already-injected pods, the policy and selectors
// of the injector's configuration) and, if so, renders the injection
// templates (text/template files users can change, with values from the
// istio-sidecar-injector ConfigMap) and merges the result into the pod.
//
// The templates are the ones the pod names in inject.istio.io/templates
// (comma-separated, through the configuration's aliases) or else the
// configuration's defaultTemplates ([sidecar]); each is rendered and a
// later one's fields are merged over an earlier one's. The chart ships
// "sidecar": istio-init (or istio-validation with the CNI plugin) running
// istio-iptables with the flags the traffic annotations ask for, istio-proxy
// running pilot-agent with the environment it reads, the app's probes
// rewritten to the agent's /app-health endpoints, the volumes and the
// sidecar.istio.io/status annotation; "grpc-agent": pilot-agent without
// Envoy serving proxyless gRPC apps its xDS bootstrap and certificates; and
// "grpc-simple": a bootstrap pointing the apps straight at istiod.
//
// Templates written for Istio render unchanged: they get Sprig's
// functions and Istio's own (annotation, isset, toJsonMap, protoToJSON,
// appendMultusNetwork, ... with Istio's meaning, funcs.go) and Istio's
// template data (MeshConfig, NativeSidecars, ProxyUID...), and after
// rendering the injector does what Istio's does to the merged pod
// (postprocess.go, overrides.go): metrics merging, ISTIO_KUBE_APP_PROBERS
// and the probe rewrite, the cluster and network environment,
// proxy.istio.io/overrides, the container order. The tests render Istio's
// own chart from the module cache (package istiochart) and compare with
// Istio's expected pods.
//
// The admission webhook (pkg/istiod/webhook) and istioctl kube-inject use
// the same Injector; package configmap keeps one in step with the
// ConfigMap through the API server.
package inject
