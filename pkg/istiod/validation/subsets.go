package validation

import (
	"context"
	"fmt"
	"slices"
	"strings"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	netlisters "istio.io/client-go/pkg/listers/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/kubecache"
)

// qualify returns a DestinationRule host as a fully qualified name: a
// short name is the Service of ns in the cluster domain suffix ("" is
// model.DefaultDomain).
func qualify(host, ns, suffix string) string {
	if strings.Contains(host, ".") || host == "" || strings.HasPrefix(host, "*") {
		return host
	}
	return model.KubeHostnameIn(host, ns, suffix)
}

// subsetIndex maps qualified hosts to the subsets their rules define.
func subsetIndex(rules []*networking.DestinationRule, suffix string) map[string][]string {
	idx := map[string][]string{}
	for _, dr := range rules {
		h := qualify(dr.Spec.GetHost(), dr.Namespace, suffix)
		names := idx[h]
		for _, s := range dr.Spec.GetSubsets() {
			if !slices.Contains(names, s.GetName()) {
				names = append(names, s.GetName())
			}
		}
		if names == nil {
			names = []string{}
		}
		idx[h] = names
	}
	return idx
}

// StaticSubsets is a SubsetLookup over a fixed set of DestinationRules
// (tests, istioctl on files).
type StaticSubsets struct {
	idx map[string][]string
}

// NewStaticSubsets indexes rules; short hosts are qualified with suffix
// ("" means model.DefaultDomain) in each rule's namespace.
func NewStaticSubsets(rules []*networking.DestinationRule, suffix string) *StaticSubsets {
	return &StaticSubsets{idx: subsetIndex(rules, suffix)}
}

// Subsets implements SubsetLookup.
func (s *StaticSubsets) Subsets(host string) ([]string, bool) {
	names, ok := s.idx[host]
	return slices.Clone(names), ok
}

// KubeSubsets is a SubsetLookup over the cluster's DestinationRules, kept
// by an informer. Until it has synced it knows no rules (and so refuses no
// subset).
type KubeSubsets struct {
	lister netlisters.DestinationRuleLister
	synced cache.InformerSynced
	suffix string
	start  func(ctx context.Context)
}

var _ SubsetLookup = (*KubeSubsets)(nil)

// NewKubeSubsets watches DestinationRules through client, a REST client of
// networking.istio.io/v1 (an Istio clientset's NetworkingV1().RESTClient(),
// say); call Run to start it.
func NewKubeSubsets(client rest.Interface, suffix string) *KubeSubsets {
	inf := kubecache.Informer(client, "destinationrules", "", &networking.DestinationRule{}, nil)
	k := &KubeSubsets{lister: netlisters.NewDestinationRuleLister(inf.GetIndexer()), synced: inf.HasSynced, suffix: suffix}
	k.start = inf.RunWithContext
	return k
}

// Run runs the informer until ctx ends.
func (k *KubeSubsets) Run(ctx context.Context) { k.start(ctx) }

// WaitForSync blocks until the informer has listed every DestinationRule
// or ctx ends.
func (k *KubeSubsets) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), k.synced) {
		return fmt.Errorf("destination rules: informer did not sync: %w", ctx.Err())
	}
	return nil
}

// Subsets implements SubsetLookup.
func (k *KubeSubsets) Subsets(host string) ([]string, bool) {
	if !k.synced() {
		return nil, false
	}
	rules, err := k.lister.List(labels.Everything())
	if err != nil {
		return nil, false
	}
	idx := subsetIndex(rules, k.suffix)
	names, ok := idx[host]
	return names, ok
}
