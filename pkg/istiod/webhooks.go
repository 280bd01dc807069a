package istiod

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/configmap"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
)

// Webhooks configures the admission webhooks (/inject, /validate) on 15017.
type Webhooks struct {
	// Addr is where they are served over HTTPS (":15017"); empty disables.
	Addr string
	// InjectConfig and InjectValues are the injector's template and values
	// (the istio-sidecar-injector ConfigMap, mounted); missing files mean
	// the chart's defaults. In file mode they are watched; in Kubernetes
	// mode they are only the starting point and the ConfigMap itself is
	// followed through the API server.
	InjectConfig, InjectValues string
	// Namespace is where the injector's ConfigMap is (istiod's namespace);
	// empty means $POD_NAMESPACE, else istio-system.
	Namespace string
	// Revision names the ConfigMap (istio-sidecar-injector-REVISION unless
	// default); empty means $REVISION, else the starting configuration's
	// revision value.
	Revision string
}

// SyncTimeout bounds how long the webhooks wait, in Kubernetes mode, for
// the injector's first look at its ConfigMap before serving anyway.
const SyncTimeout = 30 * time.Second

// injectorConfigMap returns the namespace and name of the injector's
// ConfigMap, filling what w leaves empty from the environment (Istio's
// chart sets POD_NAMESPACE and REVISION) and from the starting revision.
func (w *Webhooks) injectorConfigMap(getenv func(string) string, startRevision string) (namespace, name string) {
	namespace, rev := w.Namespace, w.Revision
	if namespace == "" {
		namespace = getenv("POD_NAMESPACE")
	}
	if namespace == "" {
		namespace = "istio-system"
	}
	if rev == "" {
		rev = getenv("REVISION")
	}
	if rev == "" {
		rev = startRevision
	}
	return namespace, configmap.Name(rev)
}

func (w *Webhooks) register(fs *pflag.FlagSet) {
	fs.StringVar(&w.Addr, "webhookAddr", ":15017", "HTTPS address of the injection and validation webhooks (empty disables)")
	fs.StringVar(&w.InjectConfig, "injectConfig", "./var/lib/istio/inject/config", "injection template and policy (the injector ConfigMap's config)")
	fs.StringVar(&w.InjectValues, "injectValues", "./var/lib/istio/inject/values", "injection values (the injector ConfigMap's values)")
}

// StartWebhooks serves the webhooks with a certificate from the CA until ctx
// ends. The injector starts from the InjectConfig and InjectValues files
// (or the chart's defaults). In file mode it re-reads those files when they
// change; in Kubernetes mode it follows the istio-sidecar-injector
// ConfigMap through the API server (an edit applies in about a second) and
// the webhooks are served once it has been read (or after SyncTimeout), and
// the validator checks subset references against the cluster's
// DestinationRules.
func StartWebhooks(ctx context.Context, cfg Config, w Webhooks, authority *ca.CA, log *slog.Logger) error {
	_, err := ServeWebhooks(ctx, cfg, w, authority, log)
	return err
}

// ServeWebhooks is StartWebhooks that also returns a channel closed once
// everything it started (server, watches, informers) has stopped, after
// ctx ends; with the webhooks disabled it is closed already.
func ServeWebhooks(ctx context.Context, cfg Config, w Webhooks, authority *ca.CA, log *slog.Logger) (<-chan struct{}, error) {
	done := make(chan struct{})
	if w.Addr == "" || authority == nil {
		close(done)
		return done, nil
	}
	icfg, err := inject.LoadFiles(w.InjectConfig, w.InjectValues)
	if err != nil {
		return nil, fmt.Errorf("injection config: %w", err)
	}
	inj, err := inject.New(icfg, log)
	if err != nil {
		return nil, err
	}
	v := &validation.Validator{DomainSuffix: "cluster.local"}
	var synced chan struct{}
	var wg sync.WaitGroup
	var kc kubernetes.Interface
	var subsets *validation.KubeSubsets
	if cfg.ConfigDir == "" {
		rc, err := restConfig(cfg)
		if err != nil {
			return nil, err
		}
		if kc, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		ic, err := istioclient.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("istio client: %w", err)
		}
		subsets = validation.NewKubeSubsets(ic, "cluster.local")
		v.Subsets = subsets
	}
	if kc == nil {
		wg.Go(func() { inj.WatchFiles(ctx, w.InjectConfig, w.InjectValues, 5*time.Second) })
	} else {
		ns, name := w.injectorConfigMap(os.Getenv, inj.Revision())
		synced = make(chan struct{})
		wg.Go(func() {
			if err := configmap.Watch(ctx, kc, ns, name, inj, log, synced); err != nil {
				log.Error("injector ConfigMap watch stopped", "err", err)
			}
		})
		wg.Go(func() { subsets.Run(ctx) })
	}
	srv := webhook.New(webhook.Options{Injector: inj, Validator: v, Log: log})
	wg.Go(func() {
		if synced != nil {
			select {
			case <-synced:
			case <-ctx.Done():
				return
			case <-time.After(SyncTimeout):
				log.Warn("injector ConfigMap not read yet; serving the webhooks with the starting configuration", "after", SyncTimeout)
			}
		}
		if err := srv.ListenAndServe(ctx, w.Addr, authority.ServerTLSConfig()); err != nil && ctx.Err() == nil {
			log.Error("webhooks stopped", "err", err)
		}
	})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done, nil
}

func restConfig(cfg Config) (*rest.Config, error) {
	if cfg.Kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	}
	return rest.InClusterConfig()
}
