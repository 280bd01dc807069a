// Package configmap follows one ConfigMap through the API server: an
// informer on that single object, so an edit is seen within a second or
// so (a kubelet takes 15–60 s to refresh a mounted ConfigMap), as Istio's
// istiod follows its mesh and injector ConfigMaps.
package configmap

import (
	"context"
	"fmt"
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/kubecache"
)

// Handler is told about the ConfigMap: Changed with its data whenever the
// data differ from the last seen (the first sight included), Deleted when
// it goes away. Calls come one at a time.
type Handler struct {
	Changed func(data map[string]string, resourceVersion string)
	Deleted func()
}

// Follow watches ConfigMap namespace/name until ctx ends, through client,
// a REST client of the core/v1 API (a clientset's CoreV1().RESTClient(),
// say: only REST calls, so a binary need not link client-go's clientset).
// synced, when not nil, is closed once the first listing has been handled
// (the ConfigMap seen, or found missing).
func Follow(ctx context.Context, client rest.Interface, namespace, name string, h Handler, log *slog.Logger, synced chan<- struct{}) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := kubecache.Informer(client, "configmaps", namespace, &corev1.ConfigMap{}, kubecache.ByName(name))
	// The informer calls its handlers one at a time, so last needs no lock.
	var last map[string]string
	seen := false
	onConfigMap := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != name {
			return
		}
		if seen && maps.Equal(cm.Data, last) {
			return
		}
		seen, last = true, maps.Clone(cm.Data)
		if h.Changed != nil {
			h.Changed(maps.Clone(cm.Data), cm.ResourceVersion)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onConfigMap,
		UpdateFunc: func(_, obj any) { onConfigMap(obj) },
		DeleteFunc: func(any) {
			seen, last = false, nil
			if h.Deleted != nil {
				h.Deleted()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch configmap %s/%s: %w", namespace, name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	if synced != nil && cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		close(synced)
	}
	<-ctx.Done()
	<-done
	log.Debug("stopped following configmap", "configmap", namespace+"/"+name)
	return nil
}
