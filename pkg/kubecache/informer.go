package kubecache

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Informer is an informer of resource (the plural of the API path,
// "configmaps") in namespace ("" for all) through client, a REST client of
// the resource's group and version, for objects like obj. It makes only
// REST calls, so a binary need not link client-go's clientset and informer
// factory (and with them the types of every API group). Objects are
// cached without managedFields and indexed by namespace, as the factory's
// informers are; tweak, when not nil, narrows the listing (ByName, say).
func Informer(client rest.Interface, resource, namespace string, obj runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	lw := cache.NewFilteredListWatchFromClient(client, resource, namespace, tweak)
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// SetTransform fails only once the informer has started.
	_ = inf.SetTransform(StripManagedFields)
	return inf
}

// ByName narrows a listing to the objects called name.
func ByName(name string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
}

// Start runs informers until ctx ends or stop is called; stop returns once
// they have all stopped (as an informer factory's Start and Shutdown).
func Start(ctx context.Context, informers ...cache.SharedIndexInformer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, inf := range informers {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}
