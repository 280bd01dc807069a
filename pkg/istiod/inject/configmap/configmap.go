// Package configmap keeps a sidecar injector in step with its
// istio-sidecar-injector ConfigMap through the API server, as Istio's
// istiod does: an informer on that one object, so an edit applies within
// a second or so instead of the 15–60 s a kubelet takes to refresh a
// mounted ConfigMap. It lives apart from package inject so that istioctl
// kube-inject, which needs no cluster, does not link client-go.
package configmap

import (
	"context"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/configmap"
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
func Watch(ctx context.Context, client rest.Interface, namespace, name string, in *inject.Injector, log *slog.Logger, synced chan<- struct{}) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "injector-configmap", "configmap", namespace+"/"+name)
	h := configmap.Handler{
		Changed: func(data map[string]string, rv string) {
			if err := apply(in, []byte(data[inject.ConfigKey]), []byte(data[inject.ValuesKey])); err != nil {
				log.Error("injector configuration not applied; keeping the current one", "resourceVersion", rv, "err", err)
				return
			}
			log.Info("injector configuration applied", "resourceVersion", rv, "revision", in.Revision())
		},
		Deleted: func() { log.Warn("injector ConfigMap deleted; keeping the current configuration") },
	}
	return configmap.Follow(ctx, client, namespace, name, h, log, synced)
}

// apply parses a ConfigMap's keys and gives them to in.
func apply(in *inject.Injector, config, values []byte) error {
	cfg, err := inject.ParseConfig(config, values)
	if err != nil {
		return err
	}
	return in.Update(cfg)
}
