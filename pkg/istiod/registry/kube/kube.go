// Package kube is istiod's registry for a Kubernetes cluster: Services,
// EndpointSlices and Pods, Istio's ServiceEntry, WorkloadEntry,
// VirtualService, DestinationRule and Sidecar, and its PeerAuthentication,
// AuthorizationPolicy and RequestAuthentication, watched with client-go
// informers. Objects that fail validation are reported and skipped.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry"
	"github.com/skiff-mesh/skiff/pkg/kubecache"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// Config selects the cluster.
type Config struct {
	// Kubeconfig is a kubeconfig path.
	Kubeconfig string
	// InCluster uses the pod's service account.
	InCluster bool
	// Rest, when set, is used instead of Kubeconfig and InCluster, with
	// its QPS and Burst (50 and 100 when it sets none).
	Rest *rest.Config
	// JSON makes the client of Kubernetes' own types speak JSON instead
	// of protobuf.
	JSON bool
	// Clients, when set, are used instead of all of the above (istiod's
	// shared clients).
	Clients *kuberest.Clients
}

// The Istio API versions watched.
const (
	istioGroupVersion    = "networking.istio.io/v1"
	securityGroupVersion = "security.istio.io/v1"
)

// Registry watches a cluster.
type Registry struct {
	log     *slog.Logger
	clients *kuberest.Clients

	mu sync.Mutex
	// dirty are the objects, by kind, whose caches changed since inputs
	// was built; every other object is kept, so a push context rebuilt
	// on them reuses what it built from them before.
	dirty    map[model.Kind]*changes
	inputs   *model.Inputs
	problems problems
	// reported are the problems logged, by message: each is logged once.
	reported map[string]struct{}
	synced   bool
	listers  *listers
}

var _ registry.Registry = (*Registry)(nil)

// New connects to the cluster (nothing is read until Run).
func New(cfg Config, log *slog.Logger) (*Registry, error) {
	if cfg.Clients != nil {
		return newRegistry(cfg.Clients, log), nil
	}
	rc := cfg.Rest
	var err error
	switch {
	case rc != nil:
	case cfg.InCluster:
		rc, err = rest.InClusterConfig()
	default:
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc = rest.CopyConfig(rc)
	if rc.QPS == 0 { // not set by the caller: above client-go's 5
		rc.QPS, rc.Burst = 50, 100
	}
	clients, err := kuberest.New(rc, !cfg.JSON)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return newRegistry(clients, log), nil
}

func newRegistry(clients *kuberest.Clients, log *slog.Logger) *Registry {
	return &Registry{log: log.With("component", "kube-registry"), clients: clients, inputs: &model.Inputs{},
		dirty: map[model.Kind]*changes{}, problems: problems{}}
}

// Clients are the registry's REST clients.
func (r *Registry) Clients() *kuberest.Clients { return r.clients }

// Run starts the informers, waits for their caches, and calls changed after
// the initial sync and after every change, until ctx ends.
func (r *Registry) Run(ctx context.Context, changed func()) error {
	served, err := r.istioKinds(istioGroupVersion)
	if err != nil {
		return err
	}
	servedSecurity, err := r.istioKinds(securityGroupVersion)
	if err != nil {
		return err
	}
	core, disc := r.clients.Core, r.clients.Discovery
	net, sec := r.clients.Networking, r.clients.Security
	services := kubecache.Informer(core, "services", "", &corev1.Service{}, nil)
	endpointSlices := kubecache.Informer(disc, "endpointslices", "", &discoveryv1.EndpointSlice{}, nil)
	pods := kubecache.Informer(core, "pods", "", &corev1.Pod{}, nil)
	if err := pods.SetTransform(trimPod); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	ls := &listers{services: services.GetStore(), slices: endpointSlices.GetStore(), pods: pods.GetStore()}
	watched := []watchedKind{
		{model.KindService, services},
		{model.KindEndpointSlice, endpointSlices},
		{model.KindPod, pods},
	}
	// istio watches the Istio resource of client, if the API server serves it.
	istio := func(kind model.Kind, client rest.Interface, served map[string]bool, resource string, obj runtime.Object) cache.Store {
		if !served[resource] {
			return nil
		}
		inf := kubecache.Informer(client, resource, "", obj, nil)
		watched = append(watched, watchedKind{kind, inf})
		return inf.GetStore()
	}
	ls.serviceEntries = istio(model.KindServiceEntry, net, served, "serviceentries", &networking.ServiceEntry{})
	ls.workloadEntries = istio(model.KindWorkloadEntry, net, served, "workloadentries", &networking.WorkloadEntry{})
	ls.virtualServices = istio(model.KindVirtualService, net, served, "virtualservices", &networking.VirtualService{})
	ls.destinationRules = istio(model.KindDestinationRule, net, served, "destinationrules", &networking.DestinationRule{})
	ls.sidecars = istio(model.KindSidecar, net, served, "sidecars", &networking.Sidecar{})
	ls.peerAuthentications = istio(model.KindPeerAuthentication, sec, servedSecurity, "peerauthentications", &security.PeerAuthentication{})
	ls.authorizationPolicies = istio(model.KindAuthorizationPolicy, sec, servedSecurity, "authorizationpolicies", &security.AuthorizationPolicy{})
	ls.requestAuthNs = istio(model.KindRequestAuthentication, sec, servedSecurity, "requestauthentications", &security.RequestAuthentication{})
	var syncedFlag sync.Mutex
	started := false
	notify := func(kind model.Kind, obj any) {
		r.mu.Lock()
		ch := r.dirty[kind]
		if ch == nil {
			ch = &changes{}
			r.dirty[kind] = ch
		}
		ch.add(obj)
		r.mu.Unlock()
		syncedFlag.Lock()
		ok := started
		syncedFlag.Unlock()
		if ok {
			changed()
		}
	}
	for _, w := range watched {
		handler := cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { notify(w.kind, o) },
			UpdateFunc: func(o, n any) {
				// Most pod updates are statuses istiod does not keep.
				if w.kind == model.KindPod && sameTrimmedPod(o, n) {
					return
				}
				notify(w.kind, n)
			},
			DeleteFunc: func(o any) { notify(w.kind, o) },
		}
		if _, err := w.inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("add event handler: %w", err)
		}
	}
	infs := make([]cache.SharedIndexInformer, len(watched))
	syncs := make([]cache.InformerSynced, len(watched))
	for i, w := range watched {
		infs[i], syncs[i] = w.inf, w.inf.HasSynced
	}
	defer kubecache.Start(ctx, infs...)()
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		return nil // ctx ended
	}
	r.mu.Lock()
	r.listers, r.synced, r.dirty = ls, true, everyKind()
	r.mu.Unlock()
	syncedFlag.Lock()
	started = true
	syncedFlag.Unlock()
	r.log.Info("kubernetes caches synced")
	changed()
	<-ctx.Done()
	return nil
}

// istioKinds returns the resources of an Istio group version the API
// server serves; missing CRDs are logged and their kinds not watched.
func (r *Registry) istioKinds(gv string) (map[string]bool, error) {
	out := map[string]bool{}
	var list []string
	err := retry(5, func() error {
		rl, err := r.resources(gv)
		if err != nil {
			return err
		}
		for _, res := range rl.APIResources {
			out[res.Name] = true
			list = append(list, res.Name)
		}
		return nil
	})
	if err != nil {
		r.log.Warn("Istio CRDs not found: their kinds are not watched", "groupVersion", gv, "err", err)
		return out, nil
	}
	slices.Sort(list)
	r.log.Info("watching Istio kinds", "groupVersion", gv, "kinds", list)
	return out, nil
}

// resources asks the API server which resources group version gv serves
// (its discovery document, as JSON).
func (r *Registry) resources(gv string) (*metav1.APIResourceList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := r.clients.Core.Get().AbsPath("/apis", gv).SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var rl metav1.APIResourceList
	if err := json.Unmarshal(body, &rl); err != nil {
		return nil, fmt.Errorf("discovery document of %s: %w", gv, err)
	}
	return &rl, nil
}

func retry(n int, f func() error) error {
	var err error
	for i := range n {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(time.Duration(i+1) * 100 * time.Millisecond)
	}
	return err
}

// Inputs returns the cached objects, rebuilt after changes: the kinds that
// changed are listed again, in namespace and name order; the others are
// the same slices as before.
func (r *Registry) Inputs() *model.Inputs {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listers != nil && len(r.dirty) > 0 {
		r.inputs = r.listers.build(r.inputs, r.dirty, r.problems)
		clear(r.dirty)
		r.reportProblems()
	}
	return r.inputs
}

// reportProblems logs, once each, the objects validation leaves out of
// every push (the validation webhook would have refused them): a problem
// is logged when it appears, and again if it goes and comes back.
func (r *Registry) reportProblems() {
	now := make(map[string]struct{}, len(r.reported))
	for _, err := range r.problems.list() {
		msg := err.Error()
		now[msg] = struct{}{}
		if _, ok := r.reported[msg]; !ok {
			r.log.Warn("invalid object left out of the configuration", "err", msg)
		}
	}
	r.reported = now
}

// Problems lists the objects that failed validation, by kind.
func (r *Registry) Problems() []error {
	r.Inputs()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.problems.list()
}

// Synced reports whether the caches have synced.
func (r *Registry) Synced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

// watchedKind is an informer and the kind it caches.
type watchedKind struct {
	kind model.Kind
	inf  cache.SharedIndexInformer
}
