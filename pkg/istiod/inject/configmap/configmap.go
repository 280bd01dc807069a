// Package configmap keeps a sidecar injector in step with its
// istio-sidecar-injector ConfigMap through the API server, as Istio's
// istiod does: an informer on that one object, so an edit applies within
// a second or so instead of the 15–60 s a kubelet takes to refresh a
// mounted ConfigMap. It lives apart from package inject so that istioctl
// kube-inject, which needs no cluster, does not link client-go.
package configmap

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
)

// Name is the injector ConfigMap's name for a control plane revision:
// istio-sidecar-injector, with "-REVISION" unless the revision is "" or
// "default".
func Name(revision string) string {
	if revision == "" || revision == "default" {
		return inject.ConfigMapName
	}
	return inject.ConfigMapName + "-" + revision
}

// Watch follows ConfigMap namespace/name and applies its config and values
// keys to in (inject.ParseConfig, then Update) whenever they change, until
// ctx ends. An invalid configuration is logged and the current one kept; so
// is a deleted ConfigMap. The first sight of the ConfigMap applies it too.
// synced, when not nil, is closed once the first listing has been handled
// (the ConfigMap applied, or found missing), so a caller can hold off
// serving until the injector has the cluster's configuration.
func Watch(ctx context.Context, client kubernetes.Interface, namespace, name string, in *inject.Injector, log *slog.Logger, synced chan<- struct{}) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "injector-configmap", "configmap", namespace+"/"+name)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	// The informer calls its handlers one at a time, so last needs no lock.
	var last []byte
	onConfigMap := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != name {
			return
		}
		config, values := []byte(cm.Data[inject.ConfigKey]), []byte(cm.Data[inject.ValuesKey])
		key := append(append(append([]byte{}, config...), 0), values...)
		if last != nil && bytes.Equal(key, last) {
			return
		}
		last = key
		if err := apply(in, config, values); err != nil {
			log.Error("injector configuration not applied; keeping the current one", "resourceVersion", cm.ResourceVersion, "err", err)
			return
		}
		log.Info("injector configuration applied", "resourceVersion", cm.ResourceVersion, "revision", in.Revision())
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onConfigMap,
		UpdateFunc: func(_, obj any) { onConfigMap(obj) },
		DeleteFunc: func(any) {
			log.Warn("injector ConfigMap deleted; keeping the current configuration")
		},
	})
	if err != nil {
		return fmt.Errorf("watch configmap %s/%s: %w", namespace, name, err)
	}
	factory.Start(ctx.Done())
	if synced != nil {
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			close(synced)
		}
	}
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// apply parses a ConfigMap's keys and gives them to in.
func apply(in *inject.Injector, config, values []byte) error {
	cfg, err := inject.ParseConfig(config, values)
	if err != nil {
		return err
	}
	return in.Update(cfg)
}
