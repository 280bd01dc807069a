// Package kube is istiod's registry for a Kubernetes cluster: Services,
// EndpointSlices and Pods, Istio's ServiceEntry, WorkloadEntry,
// VirtualService, DestinationRule and Sidecar, and its PeerAuthentication,
// AuthorizationPolicy and RequestAuthentication, watched with client-go
// informers. Objects that fail validation are reported and skipped.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	istioinformers "istio.io/client-go/pkg/informers/externalversions"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry"
	"github.com/skiff-mesh/skiff/pkg/kubecache"
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
}

// ProtobufConfig is a copy of rc whose requests and answers are protobuf
// when on (JSON still accepted), for clients of Kubernetes' built-in types
// only: custom resources have no protobuf form. Istio's clients do the same
// (ISTIO_KUBE_CLIENT_CONTENT_TYPE, protobuf by default).
func ProtobufConfig(rc *rest.Config, on bool) *rest.Config {
	rc = rest.CopyConfig(rc)
	if on {
		rc.ContentType = "application/vnd.kubernetes.protobuf"
		rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return rc
}

// The Istio API versions watched.
const (
	istioGroupVersion    = "networking.istio.io/v1"
	securityGroupVersion = "security.istio.io/v1"
)

// Registry watches a cluster.
type Registry struct {
	log   *slog.Logger
	kube  kubernetes.Interface
	istio istioclient.Interface

	mu sync.Mutex
	// dirty are the kinds whose caches changed since inputs was built;
	// every other kind's objects are kept, so a push context rebuilt on
	// them reuses what it built from them before.
	dirty    map[model.Kind]bool
	inputs   *model.Inputs
	problems map[model.Kind][]error
	synced   bool
	listers  *listers
}

var _ registry.Registry = (*Registry)(nil)

// New connects to the cluster (nothing is read until Run).
func New(cfg Config, log *slog.Logger) (*Registry, error) {
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
	kc, err := kubernetes.NewForConfig(ProtobufConfig(rc, !cfg.JSON))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ic, err := istioclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("istio client: %w", err)
	}
	return &Registry{log: log.With("component", "kube-registry"), kube: kc, istio: ic, inputs: &model.Inputs{},
		dirty: map[model.Kind]bool{}, problems: map[model.Kind][]error{}}, nil
}

// Client is the registry's Kubernetes client.
func (r *Registry) Client() kubernetes.Interface { return r.kube }

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
	kf := informers.NewSharedInformerFactoryWithOptions(r.kube, 0, informers.WithTransform(kubecache.StripManagedFields))
	isf := istioinformers.NewSharedInformerFactoryWithOptions(r.istio, 0, istioinformers.WithTransform(kubecache.StripManagedFields))
	ls := &listers{
		services: kf.Core().V1().Services().Lister(),
		slices:   kf.Discovery().V1().EndpointSlices().Lister(),
	}
	pods := kf.Core().V1().Pods().Informer()
	if err := pods.SetTransform(trimPod); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	ls.pods = podLister{pods.GetStore()}
	watched := []watchedKind{
		{model.KindService, kf.Core().V1().Services().Informer()},
		{model.KindEndpointSlice, kf.Discovery().V1().EndpointSlices().Informer()},
		{model.KindPod, pods},
	}
	nv := isf.Networking().V1()
	if served["serviceentries"] {
		ls.serviceEntries = nv.ServiceEntries().Lister()
		watched = append(watched, watchedKind{model.KindServiceEntry, nv.ServiceEntries().Informer()})
	}
	if served["workloadentries"] {
		ls.workloadEntries = nv.WorkloadEntries().Lister()
		watched = append(watched, watchedKind{model.KindWorkloadEntry, nv.WorkloadEntries().Informer()})
	}
	if served["virtualservices"] {
		ls.virtualServices = nv.VirtualServices().Lister()
		watched = append(watched, watchedKind{model.KindVirtualService, nv.VirtualServices().Informer()})
	}
	if served["destinationrules"] {
		ls.destinationRules = nv.DestinationRules().Lister()
		watched = append(watched, watchedKind{model.KindDestinationRule, nv.DestinationRules().Informer()})
	}
	if served["sidecars"] {
		ls.sidecars = nv.Sidecars().Lister()
		watched = append(watched, watchedKind{model.KindSidecar, nv.Sidecars().Informer()})
	}
	sv := isf.Security().V1()
	if servedSecurity["peerauthentications"] {
		ls.peerAuthentications = sv.PeerAuthentications().Lister()
		watched = append(watched, watchedKind{model.KindPeerAuthentication, sv.PeerAuthentications().Informer()})
	}
	if servedSecurity["authorizationpolicies"] {
		ls.authorizationPolicies = sv.AuthorizationPolicies().Lister()
		watched = append(watched, watchedKind{model.KindAuthorizationPolicy, sv.AuthorizationPolicies().Informer()})
	}
	if servedSecurity["requestauthentications"] {
		ls.requestAuthentications = sv.RequestAuthentications().Lister()
		watched = append(watched, watchedKind{model.KindRequestAuthentication, sv.RequestAuthentications().Informer()})
	}
	var syncedFlag sync.Mutex
	started := false
	notify := func(kind model.Kind) {
		r.mu.Lock()
		r.dirty[kind] = true
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
			AddFunc: func(any) { notify(w.kind) },
			UpdateFunc: func(o, n any) {
				// Most pod updates are statuses istiod does not keep.
				if w.kind == model.KindPod && sameTrimmedPod(o, n) {
					return
				}
				notify(w.kind)
			},
			DeleteFunc: func(any) { notify(w.kind) },
		}
		if _, err := w.inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("add event handler: %w", err)
		}
	}
	kf.Start(ctx.Done())
	isf.Start(ctx.Done())
	defer kf.Shutdown()
	defer isf.Shutdown()
	syncs := make([]cache.InformerSynced, len(watched))
	for i, w := range watched {
		syncs[i] = w.inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		return nil // ctx ended
	}
	r.mu.Lock()
	r.listers, r.synced = ls, true
	for _, k := range kinds {
		r.dirty[k] = true // the first build lists them all
	}
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
		rl, err := r.kube.Discovery().ServerResourcesForGroupVersion(gv)
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
	}
	return r.inputs
}

// Problems lists the objects that failed validation, by kind.
func (r *Registry) Problems() []error {
	r.Inputs()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []error
	for _, k := range kinds {
		out = append(out, r.problems[k]...)
	}
	return out
}

// Synced reports whether the caches have synced.
func (r *Registry) Synced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

var everything = labels.Everything()

// watchedKind is an informer and the kind it caches.
type watchedKind struct {
	kind model.Kind
	inf  cache.SharedIndexInformer
}
