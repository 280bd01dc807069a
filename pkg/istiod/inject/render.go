package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"istio.io/api/annotation"
	"istio.io/api/label"
	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/gotmpl"
)

// Data is what the injection template sees. Values from the pod are the
// pod's own (ObjectMeta, Spec); everything else is computed and checked by
// the injector, so the template only places it.
type Data struct {
	// ObjectMeta is the pod's metadata (Namespace filled in from the request).
	ObjectMeta metav1.ObjectMeta
	// Spec is the pod's spec as submitted.
	Spec corev1.PodSpec
	// DeploymentMeta names the workload that owns the pod.
	DeploymentMeta WorkloadMeta
	// Owner is the workload as ISTIO_META_OWNER: kubernetes://apis/...
	Owner string
	// Values are the chart values (istio-sidecar-injector "values").
	Values map[string]any
	// ProxyConfig is meshConfig.defaultConfig with the pod's
	// proxy.istio.io/config annotation merged over it.
	ProxyConfig *meshconfig.ProxyConfig
	// ProxyConfigJSON is ProxyConfig as JSON, for PROXY_CONFIG.
	ProxyConfigJSON string
	// Revision is the control plane revision ("default").
	Revision string
	// InterceptionMode is REDIRECT, TPROXY or NONE.
	InterceptionMode string
	// InitArgs are the init container's args ("istio-iptables", flags...);
	// empty with interception mode NONE.
	InitArgs []string
	// CNIEnabled is true when the CNI plugin programs capture.
	CNIEnabled bool
	// CNIAnnotations are the traffic settings the CNI plugin reads from
	// the pod (interception mode, IP ranges, ports), set in CNI mode only.
	CNIAnnotations map[string]string
	// StatusPort is the agent's status port; 0 when disabled.
	StatusPort int
	// AppProbers is ISTIO_KUBE_APP_PROBERS ("" when no probe is rewritten).
	AppProbers string
	// PrometheusMerge is true when the agent serves merged metrics, and
	// PrometheusAnnotations the app's own scrape settings it merges ("" if none).
	PrometheusMerge       bool
	PrometheusAnnotations string
	// HoldApplicationUntilProxyStarts puts the proxy first, with a
	// postStart hook that waits for it to be ready.
	HoldApplicationUntilProxyStarts bool
	// CanonicalName and CanonicalRevision label the workload for telemetry.
	CanonicalName, CanonicalRevision string
	// DefaultContainer is the pod's first container (kubectl's default).
	DefaultContainer string
	// PodPorts is the app containers' ports as JSON (ISTIO_META_POD_PORTS).
	PodPorts string
	// AppContainers is the app containers' names, comma-separated.
	AppContainers string
	// ProxyImage and InitImage are the image references.
	ProxyImage, InitImage string
	// CAAddress is where the agent sends CSRs.
	CAAddress string
	// Readiness is the proxy's readiness probe timing.
	Readiness Readiness
	// ProxyResources are the proxy's resources: the sidecar.istio.io/proxy*
	// annotations when any is set, else global.proxy.resources.
	ProxyResources map[string]any

	// The fields below are the rest of what Istio's templates read.

	// TypeMeta is the kind of the object being injected (Pod for the
	// webhook, the workload's kind for kube-inject).
	TypeMeta metav1.TypeMeta
	// MeshConfig is the mesh configuration.
	MeshConfig *meshconfig.MeshConfig
	// NativeSidecars puts istio-proxy among the init containers with
	// restartPolicy Always (Kubernetes native sidecars).
	NativeSidecars bool
	// ProxyInitImage is the init container's image as Istio names it
	// (the same as InitImage).
	ProxyInitImage string
	// ProxyUID and ProxyGID are the proxy's user and group (1337, or the
	// start of OpenShift's namespace ranges).
	ProxyUID, ProxyGID int64
	// InboundTrafficPolicyMode is the mesh's inboundTrafficPolicy mode
	// (passthrough or localhost).
	InboundTrafficPolicyMode string
	// CompliancePolicy is istiod's COMPLIANCE_POLICY ("" or fips-140-3).
	CompliancePolicy string
}

// WorkloadMeta names a pod's workload.
type WorkloadMeta struct {
	Name, Namespace, Kind, APIVersion string
}

// Readiness is the proxy readiness probe's timing.
type Readiness struct {
	InitialDelaySeconds, PeriodSeconds, FailureThreshold int
}

// parseTemplate compiles the injection template called name. As in Istio,
// a missing map key is nil (templates test optional values with if); one
// that gets printed is caught by render.
func parseTemplate(name, text string) (*gotmpl.Template, error) {
	funcs := templateFuncs()
	t, err := template.New(name).Funcs(funcs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("injection template %q: %w", name, err)
	}
	x, err := gotmpl.New(t, funcs)
	if err != nil {
		return nil, fmt.Errorf("injection template %q: %w", name, err)
	}
	return x, nil
}

// render runs the template and returns its YAML as JSON.
func render(t *gotmpl.Template, d *Data) ([]byte, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("render injection template: %w", err)
	}
	if i := bytes.Index(buf.Bytes(), []byte("<no value>")); i >= 0 {
		line := bytes.Count(buf.Bytes()[:i], []byte("\n")) + 1
		return nil, fmt.Errorf("render injection template: line %d prints a missing value (a values key the template reads is not set)\n%s", line, numbered(buf.String()))
	}
	js, err := yaml.YAMLToJSON(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("injection template output is not YAML: %w\n%s", err, numbered(buf.String()))
	}
	return js, nil
}

// numbered prefixes lines with their numbers, for errors about rendered YAML.
func numbered(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = fmt.Sprintf("%4d  %s", i+1, lines[i])
	}
	return strings.Join(lines, "\n")
}

// proxyConfig merges the pod's proxy.istio.io/config annotation (YAML or
// JSON ProxyConfig) over the mesh default.
func proxyConfig(pod *corev1.Pod, def *meshconfig.ProxyConfig) (*meshconfig.ProxyConfig, error) {
	pc := proto.Clone(def).(*meshconfig.ProxyConfig)
	if v, ok := pod.Annotations[annotation.ProxyConfig.Name]; ok && strings.TrimSpace(v) != "" {
		js, err := yaml.YAMLToJSON([]byte(v))
		if err != nil {
			return nil, &AnnotationError{Annotation: annotation.ProxyConfig.Name, Value: v, Err: fmt.Errorf("not YAML or JSON: %w", err)}
		}
		var over meshconfig.ProxyConfig
		if err := protojson.Unmarshal(js, &over); err != nil {
			return nil, &AnnotationError{Annotation: annotation.ProxyConfig.Name, Value: v, Err: err}
		}
		proto.Merge(pc, &over)
	}
	return pc, nil
}

// proxyConfigJSON is PROXY_CONFIG: pc as JSON with stable key order.
func proxyConfigJSON(pc *meshconfig.ProxyConfig) (string, error) {
	js, err := protojson.Marshal(pc)
	if err != nil {
		return "", fmt.Errorf("encode proxy config: %w", err)
	}
	// protojson's output is deliberately unstable; re-encode for stable pods.
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		return "", fmt.Errorf("encode proxy config: %w", err)
	}
	stable, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode proxy config: %w", err)
	}
	return string(stable), nil
}

var hashSuffix = regexp.MustCompile(`^(.+)-[a-z0-9]+$`)

// workload finds the pod's workload from its controller reference: a
// ReplicaSet named NAME-<pod-template-hash> is Deployment NAME; a pod
// without a controller is its own workload.
func workload(pod *corev1.Pod, ns string) WorkloadMeta {
	w := WorkloadMeta{Namespace: ns, Kind: "Pod", APIVersion: "v1", Name: pod.Name}
	if w.Name == "" {
		w.Name = strings.TrimSuffix(pod.GenerateName, "-")
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		w.Name, w.Kind, w.APIVersion = ref.Name, ref.Kind, ref.APIVersion
		if ref.Kind == "ReplicaSet" {
			if h := pod.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
				w.Name, w.Kind, w.APIVersion = strings.TrimSuffix(ref.Name, "-"+h), "Deployment", "apps/v1"
			} else if m := hashSuffix.FindStringSubmatch(ref.Name); m != nil && h != "" {
				w.Name, w.Kind, w.APIVersion = m[1], "Deployment", "apps/v1"
			}
		}
		break
	}
	return w
}

// ownerURI is ISTIO_META_OWNER for a workload.
func ownerURI(w WorkloadMeta) string {
	if w.Name == "" {
		return ""
	}
	return fmt.Sprintf("kubernetes://apis/%s/namespaces/%s/%ss/%s", w.APIVersion, w.Namespace, strings.ToLower(w.Kind), w.Name)
}

// canonical returns the canonical service name and revision labels' values.
func canonical(pod *corev1.Pod, w WorkloadMeta) (string, string) {
	first := func(def string, keys ...string) string {
		for _, k := range keys {
			if v := pod.Labels[k]; v != "" {
				return v
			}
		}
		return def
	}
	// As Istio: the name is cut to a label value's 63 characters and
	// loses leading and trailing '-', '_' and '.'.
	name := first(w.Name, label.ServiceCanonicalName.Name, "app.kubernetes.io/name", "app")
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.Trim(name, "-_."),
		first("latest", label.ServiceCanonicalRevision.Name, "app.kubernetes.io/version", "version")
}

// readiness reads the readiness.status.sidecar.istio.io/* annotations.
func readiness(pod *corev1.Pod, def Readiness) (Readiness, error) {
	r := def
	for _, f := range []struct {
		name string
		dst  *int
	}{
		{annotation.SidecarStatusReadinessInitialDelaySeconds.Name, &r.InitialDelaySeconds},
		{annotation.SidecarStatusReadinessPeriodSeconds.Name, &r.PeriodSeconds},
		{annotation.SidecarStatusReadinessFailureThreshold.Name, &r.FailureThreshold},
	} {
		v, ok := pod.Annotations[f.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return r, &AnnotationError{Annotation: f.name, Value: v, Err: fmt.Errorf("not a non-negative integer")}
		}
		*f.dst = n
	}
	if r.PeriodSeconds < 1 {
		r.PeriodSeconds = 1
	}
	if r.FailureThreshold < 1 {
		r.FailureThreshold = 1
	}
	return r, nil
}

// proxyResources is the proxy's resources: when any of the
// sidecar.istio.io/proxy{CPU,Memory}[Limit] annotations is set, those
// (and only those, as in Istio); otherwise the values' resources.
func proxyResources(pod *corev1.Pod, def map[string]any) (map[string]any, error) {
	type res struct{ name, kind, key string }
	list := []res{
		{annotation.SidecarProxyCPU.Name, "requests", "cpu"},
		{annotation.SidecarProxyMemory.Name, "requests", "memory"},
		{annotation.SidecarProxyCPULimit.Name, "limits", "cpu"},
		{annotation.SidecarProxyMemoryLimit.Name, "limits", "memory"},
	}
	out := map[string]any{}
	for _, r := range list {
		v, ok := pod.Annotations[r.name]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return nil, &AnnotationError{Annotation: r.name, Value: v, Err: err}
		}
		m, _ := out[r.kind].(map[string]any)
		if m == nil {
			m = map[string]any{}
			out[r.kind] = m
		}
		m[r.key] = q.String()
	}
	if len(out) > 0 {
		return out, nil
	}
	if def == nil {
		return map[string]any{}, nil
	}
	return def, nil
}

// podPorts is ISTIO_META_POD_PORTS, the pod's container ports (every
// container's, as Istio lists them) as a JSON list written one port a
// line the way Istio's template writes it, and the names of the app
// containers (all but skip).
func podPorts(spec *corev1.PodSpec, skip map[string]bool) (string, []string) {
	var b strings.Builder
	b.WriteString("[")
	first := true
	var names []string
	for _, c := range spec.Containers {
		if !skip[c.Name] {
			names = append(names, c.Name)
		}
		for _, p := range c.Ports {
			js, _ := json.Marshal(p)
			b.WriteString("\n    ")
			if !first {
				b.WriteString(",")
			}
			b.Write(js)
			first = false
		}
	}
	b.WriteString("\n]")
	return b.String(), names
}

// proxyImage is the sidecar.istio.io/proxyImage annotation or the default.
func proxyImage(pod *corev1.Pod, def string) (string, error) {
	v, ok := pod.Annotations[annotation.SidecarProxyImage.Name]
	if !ok {
		return def, nil
	}
	v = strings.TrimSpace(v)
	if v == "" || strings.ContainsAny(v, " \t\r\n") {
		return "", &AnnotationError{Annotation: annotation.SidecarProxyImage.Name, Value: v, Err: fmt.Errorf("not an image reference")}
	}
	return v, nil
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
