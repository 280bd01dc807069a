// Package kubecache holds the transforms applied to Kubernetes objects
// before an informer caches them, so a control plane keeps only what it
// reads. Every informer of istiod and install-cni drops managedFields, as
// Istio's own informers do: server-side apply and every update add an
// entry per field manager, often as large as the object's spec, and no
// component reads them.
package kubecache

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// StripManagedFields is a cache.TransformFunc that drops an object's
// managedFields. Objects without metadata (a deleted-final-state
// tombstone) pass through unchanged.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

var _ cache.TransformFunc = StripManagedFields
