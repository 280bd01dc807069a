package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// proxyID is the proxy's user and group id unless the namespace says
// otherwise (SetNamespaces).
const proxyID = 1337

// compiled is a checked configuration, swapped atomically by Update.
type compiled struct {
	// base is the configuration as given to Update; cfg is base with the
	// mesh config of SetMesh merged into its values.
	base      Config
	cfg       Config
	settings  *settings
	templates *templateSet
}

// Injector injects sidecars into pods. It is safe for concurrent use; the
// configuration can be replaced while it serves.
type Injector struct {
	cur        atomic.Pointer[compiled]
	namespaces atomic.Pointer[NamespaceAnnotations]
	log        *slog.Logger

	native     atomic.Bool
	compliance atomic.Pointer[string]

	mu   sync.Mutex     // serializes Update and SetMesh
	mesh map[string]any // SetMesh's mesh config, or nil
}

// New checks cfg (values, selectors, template) and returns an Injector.
func New(cfg Config, log *slog.Logger) (*Injector, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	in := &Injector{log: log.With("component", "injector")}
	if err := in.Update(cfg); err != nil {
		return nil, err
	}
	return in, nil
}

// Update replaces the configuration if it is valid; on error the current
// one stays.
func (in *Injector) Update(cfg Config) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.update(cfg, in.mesh)
}

// SetMesh gives the injector the mesh configuration (istiod's mesh config
// file, the istio ConfigMap's "mesh" key: YAML or JSON). It is merged over
// the values' meshConfig of this and every later Update, as Istio's
// templates see the mesh config istiod has. Empty clears it. On error the
// current configuration and mesh config stay.
func (in *Injector) SetMesh(mesh []byte) error {
	var m map[string]any
	if len(bytes.TrimSpace(mesh)) > 0 {
		if err := yaml.Unmarshal(mesh, &m); err != nil {
			return fmt.Errorf("mesh config: %w", err)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.update(in.cur.Load().base, m); err != nil {
		return err
	}
	in.mesh = m
	return nil
}

func (in *Injector) update(base Config, mesh map[string]any) error {
	cfg := base
	if mesh != nil {
		cfg.Values = mergeValues(base.Values, map[string]any{"meshConfig": mesh})
	}
	s, err := newSettings(&cfg)
	if err != nil {
		return err
	}
	ts, err := compileTemplates(&cfg)
	if err != nil {
		return err
	}
	in.cur.Store(&compiled{base: base, cfg: cfg, settings: s, templates: ts})
	return nil
}

// SetNativeSidecars tells templates (.NativeSidecars) to inject
// istio-proxy as a Kubernetes native sidecar (an init container with
// restartPolicy Always), unless a pod's sidecar.istio.io/nativeSidecar says
// otherwise. Istio decides it from ENABLE_NATIVE_SIDECARS and the nodes'
// Kubernetes versions; the caller decides here. It holds across Update.
func (in *Injector) SetNativeSidecars(on bool) { in.native.Store(on) }

// SetCompliancePolicy is istiod's COMPLIANCE_POLICY ("" or fips-140-3),
// seen by templates as .CompliancePolicy. It holds across Update.
func (in *Injector) SetCompliancePolicy(p string) { in.compliance.Store(&p) }

func (in *Injector) compliancePolicy() string {
	if p := in.compliance.Load(); p != nil {
		return *p
	}
	return ""
}

// Revision returns the control plane revision pods are injected for.
func (in *Injector) Revision() string { return in.cur.Load().settings.revision }

// Result is the outcome of Inject.
type Result struct {
	// Pod is the injected pod: a new object; the input is never changed.
	// When Injected is false it is a copy of the input.
	Pod *corev1.Pod
	// Injected reports whether a sidecar was added.
	Injected bool
	// Reason says why (or why not).
	Reason string
	// Warnings are non-fatal problems to show the user.
	Warnings []string
}

// Inject decides whether pod (in namespace, which wins over the pod's own
// when set) gets a sidecar and returns the injected pod. An error means the
// pod asked for something impossible (an *AnnotationError) or the
// configuration failed to render; no partial injection is ever returned.
func (in *Injector) Inject(pod *corev1.Pod, namespace string) (*Result, error) {
	c := in.cur.Load()
	out := pod.DeepCopy()
	if namespace == "" {
		namespace = pod.Namespace
	}
	if namespace == "" {
		namespace = "default"
	}
	d := decide(out, namespace, c.settings)
	res := &Result{Pod: out, Reason: d.Reason, Warnings: d.Warnings}
	if !d.Inject {
		return res, nil
	}
	if err := in.inject(c, out, namespace); err != nil {
		return nil, err
	}
	res.Injected = true
	return res, nil
}

// inject renders the template for pod and merges it in place.
func (in *Injector) inject(c *compiled, pod *corev1.Pod, ns string) error {
	s := c.settings
	in.resetAssignedUser(pod)
	names, err := c.templates.forPod(pod)
	if err != nil {
		return err
	}
	pc, err := proxyConfig(pod, s.proxyConfig)
	if err != nil {
		return err
	}
	mode, err := interceptionMode(pod, s, pc.GetInterceptionMode().String())
	if err != nil {
		return err
	}
	status, err := statusPort(pod, s, pc.GetStatusPort())
	if err != nil {
		return err
	}
	// The agent learns a non-default status port from PROXY_CONFIG.
	if status != 0 && status != 15020 {
		pc.StatusPort = int32(status)
	}
	pcJSON, err := proxyConfigJSON(pc)
	if err != nil {
		return err
	}
	uid, gid := in.proxyIDs(ns)
	args, err := initArgs(pod, s, mode, status, pc.GetProxyMetadata(), uid)
	if err != nil {
		return err
	}
	// The containers the template adds are not app containers even when the
	// pod already declares them (to override their settings).
	skip := map[string]bool{"istio-proxy": true}
	rewrites, probers, err := appProbes(pod, s, status, skip)
	if err != nil {
		return err
	}
	ready, err := readiness(pod, s.readiness)
	if err != nil {
		return err
	}
	res, err := proxyResources(pod, s.proxyResources)
	if err != nil {
		return err
	}
	defImg, initImg := s.podImages(pod, pc)
	img, err := proxyImage(pod, defImg)
	if err != nil {
		return err
	}
	merge, promJSON := prometheusAnnotations(pod, s, status)
	w := workload(pod, ns)
	name, rev := canonical(pod, w)
	ports, apps := podPorts(&pod.Spec, skip)
	meta := *pod.ObjectMeta.DeepCopy()
	meta.Namespace = ns
	def := ""
	if len(apps) > 0 {
		def = apps[0]
	}
	data := &Data{
		ObjectMeta: meta, Spec: *pod.Spec.DeepCopy(), DeploymentMeta: w, Owner: ownerURI(w),
		Values: c.cfg.Values, ProxyConfig: pc, ProxyConfigJSON: pcJSON, Revision: s.revision,
		InterceptionMode: mode, InitArgs: args, CNIEnabled: s.cni, StatusPort: status,
		CNIAnnotations: cniAnnotations(pod, s, mode, status),
		AppProbers:     probers, PrometheusMerge: merge, PrometheusAnnotations: promJSON,
		HoldApplicationUntilProxyStarts: pc.GetHoldApplicationUntilProxyStarts().GetValue() || s.hold,
		CanonicalName:                   name, CanonicalRevision: rev, DefaultContainer: def,
		PodPorts: ports, AppContainers: strings.Join(apps, ","),
		ProxyImage: img, InitImage: initImg, CAAddress: s.caAddress,
		Readiness: ready, ProxyResources: res,

		TypeMeta:   metav1.TypeMeta{Kind: w.Kind, APIVersion: w.APIVersion},
		MeshConfig: s.mesh, NativeSidecars: in.native.Load(), ProxyInitImage: initImg,
		ProxyUID: uid, ProxyGID: gid, InboundTrafficPolicyMode: inboundPolicyMode(s.mesh),
		CompliancePolicy: in.compliancePolicy(),
	}
	js, err := c.templates.render(names, data)
	if err != nil {
		return err
	}
	orig := pod.DeepCopy()
	st, err := apply(pod, js, data.HoldApplicationUntilProxyStarts)
	if err != nil {
		return err
	}
	if err := recordOverrides(pod, orig, st); err != nil {
		return err
	}
	adjustInitUser(pod, orig, mode)
	// Then what Istio's injector does after rendering.
	cluster, network := clusterInfo(pod, c.cfg.Values)
	setClusterEnv(pod, cluster, network)
	if !setsAnnotation(js, "prometheus.io/port") {
		if err := s.mergeMetrics(pod); err != nil {
			return err
		}
	}
	securePort(pod)
	// A template may turn probe rewriting off (grpc-agent does: no Envoy
	// owns the pod's traffic), as Istio rewrites after rendering.
	if on, known := parseInject(pod.Annotations[annotation.SidecarRewriteAppHTTPProbers.Name]); on || !known {
		addProbers(pod, probers)
		rewriteProbes(&pod.Spec, rewrites, status)
	}
	pod.Spec.InitContainers = orderInit(pod.Spec.InitContainers)
	st.Revision = s.revision
	for _, k := range sortedKeys(c.cfg.InjectedAnnotations) {
		pod.Annotations[k] = c.cfg.InjectedAnnotations[k]
	}
	sj, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode %s: %w", annotation.SidecarStatus.Name, err)
	}
	pod.Annotations[annotation.SidecarStatus.Name] = string(sj)
	return nil
}

// setsAnnotation reports whether a rendered fragment sets annotation k.
func setsAnnotation(js []byte, k string) bool {
	var f fragment
	if json.Unmarshal(js, &f) != nil {
		return false
	}
	_, ok := f.Metadata.Annotations[k]
	return ok
}

// Config returns a copy of the current configuration, as given to Update
// (without SetMesh's mesh config).
func (in *Injector) Config() Config {
	c := in.cur.Load().base
	c.Templates = maps.Clone(c.Templates)
	return c
}
