package istiod

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
)

// Webhooks configures the admission webhooks (/inject, /validate) on 15017.
type Webhooks struct {
	// Addr is where they are served over HTTPS (":15017"); empty disables.
	Addr string
	// InjectConfig and InjectValues are the injector's template and values
	// (the istio-sidecar-injector ConfigMap, mounted); missing files mean
	// the chart's defaults.
	InjectConfig, InjectValues string
}

func (w *Webhooks) register(fs *pflag.FlagSet) {
	fs.StringVar(&w.Addr, "webhookAddr", ":15017", "HTTPS address of the injection and validation webhooks (empty disables)")
	fs.StringVar(&w.InjectConfig, "injectConfig", "./var/lib/istio/inject/config", "injection template and policy (the injector ConfigMap's config)")
	fs.StringVar(&w.InjectValues, "injectValues", "./var/lib/istio/inject/values", "injection values (the injector ConfigMap's values)")
}

// StartWebhooks serves the webhooks with a certificate from the CA until ctx
// ends. In Kubernetes mode the validator checks subset references against
// the cluster's DestinationRules.
func StartWebhooks(ctx context.Context, cfg Config, w Webhooks, authority *ca.CA, log *slog.Logger) error {
	if w.Addr == "" || authority == nil {
		return nil
	}
	icfg, err := inject.LoadFiles(w.InjectConfig, w.InjectValues)
	if err != nil {
		return fmt.Errorf("injection config: %w", err)
	}
	inj, err := inject.New(icfg, log)
	if err != nil {
		return err
	}
	go inj.WatchFiles(ctx, w.InjectConfig, w.InjectValues, 5*time.Second)
	v := &validation.Validator{DomainSuffix: "cluster.local"}
	if cfg.ConfigDir == "" {
		rc, err := restConfig(cfg)
		if err != nil {
			return err
		}
		ic, err := istioclient.NewForConfig(rc)
		if err != nil {
			return fmt.Errorf("istio client: %w", err)
		}
		subsets := validation.NewKubeSubsets(ic, "cluster.local")
		go subsets.Run(ctx)
		v.Subsets = subsets
	}
	srv := webhook.New(webhook.Options{Injector: inj, Validator: v, Log: log.With("component", "webhook")})
	go func() {
		if err := srv.ListenAndServe(ctx, w.Addr, authority.ServerTLSConfig()); err != nil && ctx.Err() == nil {
			log.Error("webhooks stopped", "err", err)
		}
	}()
	return nil
}

func restConfig(cfg Config) (*rest.Config, error) {
	if cfg.Kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	}
	return rest.InClusterConfig()
}
