package istiod

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	meshconfig "istio.io/api/mesh/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/configmap"
	"github.com/skiff-mesh/skiff/pkg/istiod/mesh"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
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
	// DenyMissingHosts makes the validation webhook refuse an object that
	// references a host that does not exist (IST0101) instead of admitting
	// it with a warning (the default: configuration is often applied
	// before its Service).
	DenyMissingHosts bool
	// Inputs, when set, is the mesh the validation webhook analyzes an
	// admitted object against (istiod passes its registry's Inputs); nil:
	// the webhooks read the cluster (or the config directory) themselves.
	Inputs func() *model.Inputs
	// Synced reports whether Inputs holds the registry's first full read;
	// until then objects are admitted without analysis (a missing host
	// would only mean "not read yet"). Nil: always.
	Synced func() bool
	// Mesh, when set, is istiod's mesh config, which the injector's
	// templates see as Istio's do (.MeshConfig), followed as it changes.
	Mesh *mesh.Watcher
}

// injectorEnv applies Istio's injector variables: COMPLIANCE_POLICY and
// ENABLE_NATIVE_SIDECARS ("true" or "false"; Istio's default "auto",
// which detects the nodes' support, is taken as false and said once).
func injectorEnv(inj *inject.Injector, getenv func(string) string, log *slog.Logger) error {
	inj.SetCompliancePolicy(getenv("COMPLIANCE_POLICY"))
	switch v := getenv("ENABLE_NATIVE_SIDECARS"); v {
	case "true":
		inj.SetNativeSidecars(true)
	case "false":
	case "", "auto":
		log.Info("native sidecars are injected only with ENABLE_NATIVE_SIDECARS=true (node support is not detected)", "ENABLE_NATIVE_SIDECARS", v)
	default:
		return fmt.Errorf("ENABLE_NATIVE_SIDECARS=%q: want true, false or auto", v)
	}
	return nil
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
	fs.BoolVar(&w.DenyMissingHosts, "validationDenyMissingHosts", w.DenyMissingHosts,
		"refuse Istio config that references a host that does not exist (IST0101), instead of admitting it with a warning (VALIDATION_DENY_MISSING_HOSTS)")
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
	if err := injectorEnv(inj, os.Getenv, log); err != nil {
		return nil, err
	}
	if w.Mesh != nil {
		give := func(mc *meshconfig.MeshConfig) {
			b, err := protojson.Marshal(mc)
			if err == nil {
				err = inj.SetMesh(b)
			}
			if err != nil {
				log.Error("mesh config not given to the injector; keeping the current one", "err", err)
			}
		}
		give(w.Mesh.Mesh())
		w.Mesh.Subscribe(give)
	}
	v := &validation.Validator{DomainSuffix: cfg.Domain}
	var synced chan struct{}
	var wg sync.WaitGroup
	var kc *kuberest.Clients
	var subsets *validation.KubeSubsets
	if cfg.ConfigDir == "" {
		var err error
		if kc, err = kubeClients(cfg); err != nil {
			return nil, err
		}
		subsets = validation.NewKubeSubsets(kc.Networking, cfg.Domain)
		v.Subsets = subsets
	}
	if kc == nil {
		wg.Go(func() { inj.WatchFiles(ctx, w.InjectConfig, w.InjectValues, 5*time.Second) })
	} else {
		ns, name := w.injectorConfigMap(os.Getenv, inj.Revision())
		synced = make(chan struct{})
		wg.Go(func() {
			if err := configmap.Watch(ctx, kc.Core, ns, name, inj, log, synced); err != nil {
				log.Error("injector ConfigMap watch stopped", "err", err)
			}
		})
		wg.Go(func() { subsets.Run(ctx) })
	}
	if w.Inputs == nil {
		reg, err := newRegistry(ctx, cfg, log.With("component", "webhook-registry"))
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			if err := reg.Run(ctx, func() {}); err != nil && ctx.Err() == nil {
				log.Error("webhook registry stopped", "err", err)
			}
		})
		w.Inputs, w.Synced = reg.Inputs, reg.Synced
	}
	inputs := w.Inputs // the registry's: the mesh's settings are istiod's
	w.Inputs = func() *model.Inputs {
		in := *inputs()
		in.Domain = cfg.Domain
		return &in
	}
	an := &analyzer{inputs: w.Inputs, synced: w.Synced, deny: w.DenyMissingHosts}
	srv := webhook.New(webhook.Options{Injector: inj, Validator: v, Log: log, Analyze: an.analyze})
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

// analyzer adds the analysis of each object the validation webhook admits
// to its answer as warnings, or, with deny, refuses references to missing
// hosts.
type analyzer struct {
	inputs func() *model.Inputs
	synced func() bool
	deny   bool
}

func (a *analyzer) analyze(req *admissionv1.AdmissionRequest) (warnings []string, refusal string) {
	if a.synced != nil && !a.synced() {
		return nil, ""
	}
	k, msgs, err := analysis.ForObject(a.inputs(), req.Object.Raw, req.Namespace)
	if err != nil || len(msgs) == 0 {
		return nil, ""
	}
	var missing []string
	for _, m := range msgs {
		if a.deny && m.MissingHost() {
			missing = append(missing, m.Field+": "+m.Text)
		}
		warnings = append(warnings, m.Warning())
	}
	if len(missing) > 0 {
		return nil, fmt.Sprintf("configuration is invalid: %s: %s", k, strings.Join(missing, "; "))
	}
	return warnings, ""
}

// restConfig is the API server client configuration of cfg, with its
// request rate limits.
func restConfig(cfg Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = cfg.KubeQPS, cfg.KubeBurst
	if rc.QPS == 0 {
		rc.QPS = defaultKubeQPS
	}
	if rc.Burst == 0 {
		rc.Burst = defaultKubeBurst
	}
	return rc, nil
}

// NewKubeClients makes the API server clients of cfg for every part of
// istiod to share (set them as cfg.Clients): REST clients of istiod's
// groups, Kubernetes' own in protobuf unless cfg asks for JSON (the API
// server encodes, and istiod decodes, protobuf for a fraction of JSON's
// CPU: watched pods, TokenReviews; Istio's CRDs are served in JSON only).
// In file mode (cfg.ConfigDir) there are none: nil.
func NewKubeClients(cfg Config) (*kuberest.Clients, error) {
	if cfg.ConfigDir != "" {
		return nil, nil
	}
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	c, err := kuberest.New(rc, !cfg.KubeJSON)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

// kubeClients are cfg's shared clients, else clients of its own.
func kubeClients(cfg Config) (*kuberest.Clients, error) {
	if cfg.Clients != nil {
		return cfg.Clients, nil
	}
	return NewKubeClients(cfg)
}
