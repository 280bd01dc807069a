package model

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/mesh"
)

// PushContext is an immutable snapshot of the mesh for one push: services,
// endpoints and Istio configuration, indexed for the generators. Nothing in
// it changes after BuildPushContext returns, except its cache (see Memo),
// which only holds values derived from it.
type PushContext struct {
	// Version names this snapshot; it is the version_info of responses.
	Version string
	// Services are all services, sorted by host name.
	Services []*Service
	// ServiceByHost indexes Services.
	ServiceByHost map[string]*Service
	// Endpoints are the endpoints of each service, by host name.
	Endpoints map[string][]Endpoint
	// VirtualServices bound to the mesh (gateways empty or "mesh"), oldest first.
	VirtualServices []*networking.VirtualService
	// DestinationRules, oldest first.
	DestinationRules []*networking.DestinationRule
	// Sidecars by namespace, those with a workload selector first.
	Sidecars map[string][]*networking.Sidecar
	// WorkloadEntries indexes workload entries by address, for proxy identity.
	WorkloadEntries map[string]*networking.WorkloadEntry
	// Mesh is the mesh configuration (Istio's defaults when the inputs
	// have none).
	Mesh *meshconfig.MeshConfig
	// Domain is the cluster DNS domain services are named in (the inputs',
	// normalized: DefaultDomain when they have none).
	Domain string
	// Security holds PeerAuthentication, AuthorizationPolicy and
	// RequestAuthentication, indexed by namespace.
	Security *SecurityPolicies
	// ConfigHash fingerprints everything except endpoints and pods.
	ConfigHash uint64
	// EndpointHash fingerprints each service's endpoints, by host name.
	EndpointHash map[string]uint64

	memoMu sync.Mutex
	memos  []memoStore // by Memo id

	// What Rebuild reuses.
	inputs *Inputs
	pods   *podIndex
	// podsFrom is the id of the pod index pods was made from by Rebuild,
	// and podsMoved the keys of the pods that differ between the two.
	podsFrom    uint64
	podsMoved   podKeys
	kubeByHost  map[string]*corev1.Service
	entryByHost map[string]*networking.ServiceEntry
	slicesBySvc map[nsName][]*discoveryv1.EndpointSlice
}

// nsName keys objects by namespace and name without building strings.
type nsName struct{ ns, name string }

// Change says what differs between two push contexts.
type Change struct {
	// Full is set when anything but endpoints changed.
	Full bool
	// Hosts are the services whose endpoints changed (when not Full).
	Hosts map[string]struct{}
	// Proxies are the addresses whose pods appeared, went or changed
	// namespace or labels (when not Full): a proxy there that sends no
	// labels of its own takes its pod's (Proxy.WorkloadLabels), so its
	// configuration may differ; no other proxy's does, since what else
	// istiod takes from pods is in their endpoints.
	Proxies map[string]struct{}
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool { return !c.Full && len(c.Hosts) == 0 && len(c.Proxies) == 0 }

// Diff returns what changed from prev to pc; a nil prev is a full change.
func (pc *PushContext) Diff(prev *PushContext) Change {
	if prev == nil || prev.ConfigHash != pc.ConfigHash {
		return Change{Full: true}
	}
	hosts := map[string]struct{}{}
	for h, v := range pc.EndpointHash {
		if prev.EndpointHash[h] != v {
			hosts[h] = struct{}{}
		}
	}
	for h := range prev.EndpointHash {
		if _, ok := pc.EndpointHash[h]; !ok {
			hosts[h] = struct{}{}
		}
	}
	// A cluster's SANs are its endpoints' service accounts, so, as in
	// Istio, endpoints that change them change CDS: a full push.
	for h := range hosts {
		if !sameServiceAccounts(prev.Endpoints[h], pc.Endpoints[h]) {
			return Change{Full: true}
		}
	}
	c := Change{Hosts: hosts}
	if pc.pods != prev.pods { // else the same pods, indexed once
		c.Proxies = pc.changedProxies(prev)
	}
	return c
}

// changedProxies returns the addresses whose pod differs between prev and
// pc in what Proxy.WorkloadLabels reads: being there, its namespace, its
// labels. Only the addresses Rebuild found moved are compared when pc was
// rebuilt from prev's pods.
func (pc *PushContext) changedProxies(prev *PushContext) map[string]struct{} {
	out := map[string]struct{}{}
	same := func(x, y *Pod) bool {
		return x == y || (x != nil && y != nil && x.Namespace == y.Namespace && maps.Equal(x.Labels, y.Labels))
	}
	if pc.podsFrom == prev.pods.id {
		for ip := range pc.podsMoved.ips {
			if !same(prev.pods.byIP(ip), pc.pods.byIP(ip)) {
				out[ip] = struct{}{}
			}
		}
		return out
	}
	a, b := prev.pods.flat().ips, pc.pods.flat().ips
	for ip, p := range b {
		if !same(a[ip], p) {
			out[ip] = struct{}{}
		}
	}
	for ip := range a {
		if _, ok := b[ip]; !ok {
			out[ip] = struct{}{}
		}
	}
	return out
}

// PodByIP returns the pod at address ip, or nil.
func (pc *PushContext) PodByIP(ip string) *Pod { return pc.pods.byIP(ip) }

// sameServiceAccounts reports whether a and b name the same set of service
// accounts.
func sameServiceAccounts(a, b []Endpoint) bool {
	set := func(eps []Endpoint) []string {
		var out []string
		for _, e := range eps {
			if e.ServiceAccount != "" && !slices.Contains(out, e.ServiceAccount) {
				out = append(out, e.ServiceAccount)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(set(a), set(b))
}

// BuildPushContext indexes in. Conflicts (two objects defining one host) are
// resolved deterministically: Kubernetes services win over ServiceEntries,
// then the oldest object wins.
func BuildPushContext(in *Inputs, version string) *PushContext { return Rebuild(nil, in, version) }

// Rebuild is BuildPushContext reusing what in shares with prev's inputs:
// when every configuration object is the same (registries keep the pointers
// of unchanged objects), services and configuration are taken from prev, and
// so are the endpoints of services whose EndpointSlices are the same and
// name no pod that changed.
func Rebuild(prev *PushContext, in *Inputs, version string) *PushContext {
	pc := &PushContext{
		Version:         version,
		Endpoints:       map[string][]Endpoint{},
		WorkloadEntries: map[string]*networking.WorkloadEntry{},
		EndpointHash:    map[string]uint64{},
		inputs:          in,
	}
	if prev != nil && prev.inputs != nil && sameConfig(prev.inputs, in) {
		pc.copyConfig(prev)
		if !samePtrs(prev.inputs.Pods, in.Pods) {
			// Pods are read by the endpoints and by proxies' labels only.
			pc.pods, pc.podsMoved = prev.pods.next(in.Pods)
			pc.podsFrom = prev.pods.id
		}
	} else {
		pc.buildConfig(in)
		prev = nil
	}
	pc.buildEndpoints(in, prev)
	return pc
}

// SameConfig reports whether in holds the configuration objects pc was
// built from, so that a push context built from in can differ from pc in
// its endpoints and pods only.
func (pc *PushContext) SameConfig(in *Inputs) bool {
	return pc.inputs != nil && sameConfig(pc.inputs, in)
}

// sameConfig reports whether a and b hold the same configuration objects
// (everything but EndpointSlices, WorkloadEntries and Pods).
func sameConfig(a, b *Inputs) bool {
	return a.Mesh == b.Mesh && Domain(a.Domain) == Domain(b.Domain) && samePtrs(a.Services, b.Services) && samePtrs(a.ServiceEntries, b.ServiceEntries) &&
		samePtrs(a.VirtualServices, b.VirtualServices) && samePtrs(a.DestinationRules, b.DestinationRules) && samePtrs(a.Sidecars, b.Sidecars) &&
		samePtrs(a.PeerAuthentications, b.PeerAuthentications) && samePtrs(a.AuthorizationPolicies, b.AuthorizationPolicies) &&
		samePtrs(a.RequestAuthentications, b.RequestAuthentications)
}

func samePtrs[T comparable](a, b []T) bool { return slices.Equal(a, b) }

func (pc *PushContext) copyConfig(prev *PushContext) {
	pc.Services, pc.ServiceByHost = prev.Services, prev.ServiceByHost
	pc.VirtualServices, pc.DestinationRules, pc.Sidecars = prev.VirtualServices, prev.DestinationRules, prev.Sidecars
	pc.pods, pc.ConfigHash = prev.pods, prev.ConfigHash
	pc.kubeByHost, pc.entryByHost = prev.kubeByHost, prev.entryByHost
	pc.Security, pc.Mesh, pc.Domain = prev.Security, prev.Mesh, prev.Domain
}

// buildConfig indexes services and Istio configuration.
func (pc *PushContext) buildConfig(in *Inputs) {
	pc.Domain = Domain(in.Domain)
	pc.ServiceByHost = map[string]*Service{}
	pc.Sidecars = map[string][]*networking.Sidecar{}
	pc.pods = indexPods(in.Pods)
	pc.kubeByHost = map[string]*corev1.Service{}
	for _, s := range sortedByAge(in.Services) {
		svc := serviceFromKube(s, pc.Domain)
		if _, dup := pc.ServiceByHost[svc.Hostname]; dup {
			continue
		}
		pc.ServiceByHost[svc.Hostname] = svc
		pc.kubeByHost[svc.Hostname] = s
	}
	pc.entryByHost = map[string]*networking.ServiceEntry{}
	for _, se := range sortedByAge(in.ServiceEntries) {
		for _, svc := range servicesFromEntry(se) {
			if _, dup := pc.ServiceByHost[svc.Hostname]; dup {
				continue
			}
			pc.ServiceByHost[svc.Hostname] = svc
			pc.entryByHost[svc.Hostname] = se
		}
	}
	for _, svc := range pc.ServiceByHost {
		pc.Services = append(pc.Services, svc)
	}
	slices.SortFunc(pc.Services, func(a, b *Service) int { return strings.Compare(a.Hostname, b.Hostname) })
	for _, vs := range sortedByAge(in.VirtualServices) {
		gws := vs.Spec.GetGateways()
		if len(gws) == 0 || slices.Contains(gws, "mesh") {
			pc.VirtualServices = append(pc.VirtualServices, vs)
		}
	}
	pc.DestinationRules = sortedByAge(in.DestinationRules)
	for _, sc := range sortedByAge(in.Sidecars) {
		pc.Sidecars[sc.Namespace] = append(pc.Sidecars[sc.Namespace], sc)
	}
	for ns, list := range pc.Sidecars {
		slices.SortStableFunc(list, func(a, b *networking.Sidecar) int {
			return cmp.Compare(boolInt(a.Spec.GetWorkloadSelector() == nil), boolInt(b.Spec.GetWorkloadSelector() == nil))
		})
		pc.Sidecars[ns] = list
	}
	pc.Mesh = in.Mesh
	if pc.Mesh == nil {
		pc.Mesh = mesh.Default()
	}
	pc.Security = indexSecurity(in, pc.Mesh)
	pc.ConfigHash = pc.hashConfig()
}

// buildEndpoints computes each service's endpoints, taking from prev (same
// configuration) those whose EndpointSlices did not change.
func (pc *PushContext) buildEndpoints(in *Inputs, prev *PushContext) {
	var moved podKeys // the pods that changed since prev
	if prev != nil && pc.pods != prev.pods {
		moved = pc.podsMoved
	}
	if prev != nil && samePtrs(prev.inputs.WorkloadEntries, in.WorkloadEntries) && pc.patchEndpoints(in, prev, moved) {
		return
	}
	pc.Endpoints, pc.EndpointHash = map[string][]Endpoint{}, map[string]uint64{}
	pc.WorkloadEntries = map[string]*networking.WorkloadEntry{}
	pc.slicesBySvc = make(map[nsName][]*discoveryv1.EndpointSlice, len(in.EndpointSlices))
	for _, sl := range in.EndpointSlices {
		key := sliceKey(sl)
		pc.slicesBySvc[key] = append(pc.slicesBySvc[key], sl)
	}
	wes := sortedByAge(in.WorkloadEntries)
	for _, we := range wes {
		pc.WorkloadEntries[we.Spec.GetAddress()] = we
	}
	if prev != nil && !samePtrs(prev.inputs.WorkloadEntries, in.WorkloadEntries) {
		prev = nil
	}
	if prev != nil {
		// Start from prev's maps (a bulk copy) and replace what changed.
		pc.Endpoints, pc.EndpointHash = maps.Clone(prev.Endpoints), maps.Clone(prev.EndpointHash)
	}
	for _, svc := range pc.Services {
		k := pc.kubeByHost[svc.Hostname]
		if prev != nil && (k == nil || pc.sameEndpointInputs(prev, nsName{k.Namespace, k.Name}, moved)) {
			continue
		}
		eps := pc.serviceEndpoints(svc, k, wes)
		if len(eps) > 0 {
			pc.Endpoints[svc.Hostname] = eps
		} else {
			delete(pc.Endpoints, svc.Hostname)
		}
		pc.EndpointHash[svc.Hostname] = hashEndpoints(eps)
	}
}

// maxPatched bounds the EndpointSlices patchEndpoints handles one by one.
const maxPatched = 64

// sameEndpointInputs reports whether the Kubernetes service key reads the
// same EndpointSlices as in prev and none of them names a moved pod.
func (pc *PushContext) sameEndpointInputs(prev *PushContext, key nsName, moved podKeys) bool {
	sls := pc.slicesBySvc[key]
	return samePtrs(prev.slicesBySvc[key], sls) && !moved.readBy(sls)
}

// patchEndpoints handles the common case cheaply: the same EndpointSlices
// in the same order (registries keep both), a few of them replaced, or
// pods moved. It shares prev's indexes and recomputes only the services of
// the replaced slices and of the slices naming a moved pod; false means it
// could not.
func (pc *PushContext) patchEndpoints(in *Inputs, prev *PushContext, moved podKeys) bool {
	old := prev.inputs.EndpointSlices
	if len(old) != len(in.EndpointSlices) {
		return false
	}
	var changed []int
	for i, sl := range in.EndpointSlices {
		if sl != old[i] {
			if changed = append(changed, i); len(changed) > maxPatched {
				return false
			}
		}
	}
	for _, i := range changed {
		if sliceKey(old[i]) != sliceKey(in.EndpointSlices[i]) {
			return false
		}
	}
	pc.WorkloadEntries, pc.slicesBySvc = prev.WorkloadEntries, prev.slicesBySvc
	pc.Endpoints, pc.EndpointHash = prev.Endpoints, prev.EndpointHash
	if len(changed) == 0 && moved.empty() {
		return true
	}
	pc.slicesBySvc = maps.Clone(prev.slicesBySvc)
	pc.Endpoints, pc.EndpointHash = maps.Clone(prev.Endpoints), maps.Clone(prev.EndpointHash)
	touched := map[nsName]bool{}
	if !moved.empty() {
		for key, sls := range prev.slicesBySvc {
			if moved.readBy(sls) {
				touched[key] = true
			}
		}
	}
	for _, i := range changed {
		key := sliceKey(in.EndpointSlices[i])
		list := slices.Clone(pc.slicesBySvc[key])
		for j, sl := range list {
			if sl == old[i] {
				list[j] = in.EndpointSlices[i]
			}
		}
		pc.slicesBySvc[key] = list
		touched[key] = true
	}
	wes := sortedByAge(in.WorkloadEntries)
	for key := range touched {
		host := pc.KubeHostname(key.name, key.ns)
		svc, k := pc.ServiceByHost[host], pc.kubeByHost[host]
		if svc == nil || k == nil {
			continue // slices of no service
		}
		eps := pc.serviceEndpoints(svc, k, wes)
		if len(eps) > 0 {
			pc.Endpoints[host] = eps
		} else {
			delete(pc.Endpoints, host)
		}
		pc.EndpointHash[host] = hashEndpoints(eps)
	}
	return true
}

func sliceKey(sl *discoveryv1.EndpointSlice) nsName {
	return nsName{sl.Namespace, sl.Labels["kubernetes.io/service-name"]}
}

func (pc *PushContext) serviceEndpoints(svc *Service, k *corev1.Service, wes []*networking.WorkloadEntry) []Endpoint {
	var eps []Endpoint
	if k != nil {
		if svc.Resolution == DNSLB && k.Spec.ExternalName != "" {
			for _, p := range svc.Ports {
				eps = append(eps, Endpoint{Address: k.Spec.ExternalName, DNSName: true, Port: p.Port, ServicePort: p.Port, Healthy: true, Weight: 1})
			}
		}
		for _, sl := range pc.slicesBySvc[nsName{k.Namespace, k.Name}] {
			eps = append(eps, sliceEndpoints(svc, k, sl, pc.pods)...)
		}
	} else if se := pc.entryByHost[svc.Hostname]; se != nil {
		for _, we := range se.Spec.GetEndpoints() {
			eps = append(eps, workloadEndpoints(svc, we, true)...)
		}
		if svc.Resolution == DNSLB && len(se.Spec.GetEndpoints()) == 0 && !strings.HasPrefix(svc.Hostname, "*") {
			for _, p := range svc.Ports {
				target := p.Port
				if p.TargetPort != 0 {
					target = p.TargetPort
				}
				eps = append(eps, Endpoint{Address: svc.Hostname, DNSName: true, Port: target, ServicePort: p.Port, Healthy: true, Weight: 1})
			}
		}
	}
	if len(svc.Selector) > 0 {
		for _, we := range wes {
			if we.Namespace == svc.Namespace && LabelsMatch(svc.Selector, we.Spec.GetLabels()) {
				eps = append(eps, workloadEndpoints(svc, &we.Spec, true)...)
			}
		}
	}
	slices.SortStableFunc(eps, func(a, b Endpoint) int {
		return cmp.Or(cmp.Compare(a.ServicePort, b.ServicePort), strings.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	return eps
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hashConfig fingerprints services and Istio config. Pods are left out:
// what istiod reads of them is in the endpoints' hash, and in the labels of
// the proxies that send none, which Diff names.
func (pc *PushContext) hashConfig() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "domain %s\n", pc.Domain)
	for _, s := range pc.Services {
		fmt.Fprintf(h, "%+v\n", *s)
	}
	mo := proto.MarshalOptions{Deterministic: true}
	put := func(kind, ns, name string, m proto.Message) {
		b, _ := mo.Marshal(m)
		fmt.Fprintf(h, "%s/%s/%s:", kind, ns, name)
		h.Write(b)
	}
	for _, v := range pc.VirtualServices {
		put("vs", v.Namespace, v.Name, &v.Spec)
	}
	for _, v := range pc.DestinationRules {
		put("dr", v.Namespace, v.Name, &v.Spec)
	}
	for _, ns := range sortedKeys(pc.Sidecars) {
		for _, v := range pc.Sidecars[ns] {
			put("sc", v.Namespace, v.Name, &v.Spec)
		}
	}
	put("mesh", "", "", pc.Mesh)
	pc.Security.hash(put)
	return h.Sum64()
}

func hashEndpoints(eps []Endpoint) uint64 {
	h := fnv.New64a()
	for _, e := range eps {
		fmt.Fprintf(h, "%s %t %d %d %v %s %s %t %d\n", e.Address, e.DNSName, e.Port, e.ServicePort,
			sortedPairs(e.Labels), e.ServiceAccount, e.Locality, e.Healthy, e.Weight)
	}
	return h.Sum64()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, k+"="+m[k])
	}
	return out
}
