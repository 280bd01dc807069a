package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-mesh/skiff/pkg/kubecache"
)

// InjectionWebhookSuffix ends the names of the injection webhooks whose
// caBundle istiod keeps, in the MutatingWebhookConfigurations of its
// revision (Istio's "sidecar-injector.istio.io").
const InjectionWebhookSuffix = "sidecar-injector.istio.io"

// RootSource gives the CA root bundle the webhook server's certificate
// chains to; *ca.CA is one.
type RootSource interface {
	// RootCertPEM returns the current root bundle.
	RootCertPEM() []byte
	// Changed returns a channel closed at the next change of the roots.
	Changed() <-chan struct{}
}

// ReadyFunc reports whether the validation webhook is serving for cfg, so
// that its failurePolicy may become Fail: nil when it is, else why not.
type ReadyFunc func(ctx context.Context, cfg *admissionregv1.ValidatingWebhookConfiguration) error

// PatcherOptions configures a ConfigurationPatcher.
type PatcherOptions struct {
	// Client reads, watches and patches the webhook configurations: a REST
	// client of admissionregistration.k8s.io/v1 (a clientset's
	// AdmissionregistrationV1().RESTClient(), say).
	Client rest.Interface
	// Revision is istiod's revision ("" means "default"): only
	// configurations labelled istio.io/rev=Revision are touched.
	Revision string
	// Roots is the caBundle written into the configurations.
	Roots RootSource
	// Ready decides when validation fails closed (DryRunReady in istiod);
	// nil leaves failurePolicy as it is.
	Ready ReadyFunc
	// Log receives one line per patch and per failure; nil discards.
	Log *slog.Logger
	// SkipMutating and SkipValidating leave that kind of configuration
	// alone (Istio's INJECTION_WEBHOOK_CONFIG_NAME or
	// VALIDATION_WEBHOOK_CONFIG_NAME set empty).
	SkipMutating, SkipValidating bool
	// MaxRetryDelay bounds the back-off of a failed or not-yet-ready
	// reconcile (default 10 s; Istio waits up to a minute).
	MaxRetryDelay time.Duration
}

// ConfigurationPatcher keeps the caBundle of the admission webhook
// configurations of istiod's revision equal to the CA root, as Istio's
// istiod does: in the MutatingWebhookConfigurations, the webhooks whose
// names end in InjectionWebhookSuffix; in the ValidatingWebhookConfigurations
// (istio-validator-REV-NS), every webhook, whose failurePolicy it also
// switches from Ignore to Fail once Ready says the webhook serves. It
// reconciles at start, on every change of those objects (so an edit or a
// helm upgrade that resets them is undone within moments) and when the
// roots change. Configurations without the revision's label are never read.
type ConfigurationPatcher struct {
	o     PatcherOptions
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[configKey]

	mutating   admissionlisters.MutatingWebhookConfigurationLister
	validating admissionlisters.ValidatingWebhookConfigurationLister
	// readyOnce latches Ready's first success, as Istio's controller does.
	readyOnce atomic.Bool
	// patched maps a configuration to the resourceVersion it had when it
	// was last patched: while the informer still holds that version, the
	// patch is not repeated (and not logged twice); the informer's update
	// event brings the next one. Only the worker goroutine uses it.
	patched map[configKey]string
}

// configKey names one webhook configuration.
type configKey struct {
	Kind string // "MutatingWebhookConfiguration" or "ValidatingWebhookConfiguration"
	Name string
}

const (
	kindMutating   = "MutatingWebhookConfiguration"
	kindValidating = "ValidatingWebhookConfiguration"
)

// errNotReady makes a reconcile retry while validation is not yet ready.
var errNotReady = errors.New("validation webhook not ready")

// NewConfigurationPatcher returns a patcher for o; Run starts it.
func NewConfigurationPatcher(o PatcherOptions) (*ConfigurationPatcher, error) {
	if o.Client == nil {
		return nil, errors.New("webhook configuration patcher: Client is required")
	}
	if o.Roots == nil {
		return nil, errors.New("webhook configuration patcher: Roots is required")
	}
	if o.Revision == "" {
		o.Revision = "default"
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &ConfigurationPatcher{
		o:       o,
		patched: map[configKey]string{},
		log:     o.Log.With("component", "webhook-patcher", "revision", o.Revision),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[configKey](100*time.Millisecond, o.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[configKey]{Name: "webhook-configurations"}),
	}, nil
}

// Run watches and patches until ctx ends; call it once. It returns an
// error only when the informers cannot be set up.
func (p *ConfigurationPatcher) Run(ctx context.Context) error {
	defer p.queue.ShutDown()
	rootsChanged := p.o.Roots.Changed()
	byRevision := func(lo *metav1.ListOptions) {
		lo.LabelSelector = labels.SelectorFromSet(labels.Set{LabelRevision: p.o.Revision}).String()
	}
	// Only what is asked for is watched.
	watched := map[string]cache.SharedIndexInformer{}
	if !p.o.SkipMutating {
		inf := kubecache.Informer(p.o.Client, "mutatingwebhookconfigurations", "", &admissionregv1.MutatingWebhookConfiguration{}, byRevision)
		watched[kindMutating], p.mutating = inf, admissionlisters.NewMutatingWebhookConfigurationLister(inf.GetIndexer())
	}
	if !p.o.SkipValidating {
		inf := kubecache.Informer(p.o.Client, "validatingwebhookconfigurations", "", &admissionregv1.ValidatingWebhookConfiguration{}, byRevision)
		watched[kindValidating], p.validating = inf, admissionlisters.NewValidatingWebhookConfigurationLister(inf.GetIndexer())
	}
	for kind, inf := range watched {
		enqueue := func(obj any) {
			if m, err := meta(obj); err == nil {
				p.queue.Add(configKey{Kind: kind, Name: m.GetName()})
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
		}); err != nil {
			return fmt.Errorf("webhook configuration patcher: watch %ss: %w", kind, err)
		}
	}
	infs := make([]cache.SharedIndexInformer, 0, len(watched))
	for _, inf := range watched {
		infs = append(infs, inf)
	}
	defer kubecache.Start(ctx, infs...)()
	for kind, inf := range watched {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("webhook configuration patcher: %s informer did not sync", kind)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.watchRoots(ctx, rootsChanged)
	}()
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for p.processNext(ctx) {
	}
	<-done
	return nil
}

// watchRoots re-reconciles every configuration when the roots change. The
// channel is taken before the reconciles it triggers read the roots, so no
// change is missed.
func (p *ConfigurationPatcher) watchRoots(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			changed = p.o.Roots.Changed()
			p.log.Info("CA roots changed; re-patching webhook configurations")
			p.enqueueAll()
		}
	}
}

// enqueueAll queues every configuration of the revision.
func (p *ConfigurationPatcher) enqueueAll() {
	if p.mutating != nil {
		ms, _ := p.mutating.List(labels.Everything()) // a cache lister never fails
		for _, m := range ms {
			p.queue.Add(configKey{Kind: kindMutating, Name: m.Name})
		}
	}
	if p.validating != nil {
		vs, _ := p.validating.List(labels.Everything())
		for _, v := range vs {
			p.queue.Add(configKey{Kind: kindValidating, Name: v.Name})
		}
	}
}

func (p *ConfigurationPatcher) processNext(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	err := p.reconcile(ctx, key)
	switch {
	case err == nil:
		p.queue.Forget(key)
	case ctx.Err() != nil:
	case errors.Is(err, errNotReady):
		p.log.Debug("validation not ready to fail closed; retrying", "name", key.Name, "err", err)
		p.queue.AddRateLimited(key)
	default:
		p.log.Error("patch webhook configuration", "kind", key.Kind, "name", key.Name, "err", err)
		p.queue.AddRateLimited(key)
	}
	return true
}

func (p *ConfigurationPatcher) reconcile(ctx context.Context, key configKey) error {
	root := p.o.Roots.RootCertPEM()
	if err := VerifyCABundle(root); err != nil {
		// Nothing to write until the roots change (watchRoots requeues then).
		p.log.Error("CA root not usable as a caBundle", "kind", key.Kind, "name", key.Name, "err", err)
		return nil
	}
	switch key.Kind {
	case kindMutating:
		return p.reconcileMutating(ctx, key.Name, root)
	case kindValidating:
		return p.reconcileValidating(ctx, key.Name, root)
	}
	return nil
}

// stale reports whether the informer still holds the version of key that
// was last patched.
func (p *ConfigurationPatcher) stale(key configKey, resourceVersion string) bool {
	return p.patched[key] == resourceVersion
}

func (p *ConfigurationPatcher) reconcileMutating(ctx context.Context, name string, root []byte) error {
	cfg, err := p.mutating.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s %s: %w", kindMutating, name, err)
	}
	if cfg.Labels[LabelRevision] != p.o.Revision || p.stale(configKey{kindMutating, name}, cfg.ResourceVersion) {
		return nil
	}
	var ops []Op
	found := false
	for i, wh := range cfg.Webhooks {
		if !strings.HasSuffix(wh.Name, InjectionWebhookSuffix) {
			continue
		}
		found = true
		if !bytes.Equal(wh.ClientConfig.CABundle, root) {
			ops = append(ops, caBundleOps(i, wh.Name, root)...)
		}
	}
	if !found {
		p.log.Debug("no injection webhook in configuration; left alone", "kind", kindMutating, "name", name)
		return nil
	}
	if len(ops) == 0 {
		return nil
	}
	rv, err := p.patch(ctx, kindMutating, name, cfg.ResourceVersion, ops)
	if err != nil {
		return err
	}
	p.log.Info("patched caBundle", "kind", kindMutating, "name", name, "webhooks", len(ops)/2, "resourceVersion", rv)
	return nil
}

func (p *ConfigurationPatcher) reconcileValidating(ctx context.Context, name string, root []byte) error {
	cfg, err := p.validating.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s %s: %w", kindValidating, name, err)
	}
	if cfg.Labels[LabelRevision] != p.o.Revision || p.stale(configKey{kindValidating, name}, cfg.ResourceVersion) {
		return nil
	}
	caChanged, ignoring := 0, false
	for _, wh := range cfg.Webhooks {
		if !bytes.Equal(wh.ClientConfig.CABundle, root) {
			caChanged++
		}
		// As Istio: an unset policy is the API server's default, Fail.
		if wh.FailurePolicy != nil && *wh.FailurePolicy != admissionregv1.Fail {
			ignoring = true
		}
	}
	if caChanged == 0 && !ignoring {
		return nil
	}
	failClosed := false
	var notReady error
	if ignoring && p.o.Ready != nil {
		if caChanged > 0 && !p.readyOnce.Load() {
			// The API server cannot call the webhook before it trusts it.
			notReady = fmt.Errorf("%w: caBundle being patched", errNotReady)
		} else {
			failClosed, notReady = p.ready(ctx, cfg)
		}
	}
	var ops []Op
	for i, wh := range cfg.Webhooks {
		if !bytes.Equal(wh.ClientConfig.CABundle, root) {
			ops = append(ops, caBundleOps(i, wh.Name, root)...)
		}
		if failClosed && (wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregv1.Fail) {
			ops = append(ops, nameTest(i, wh.Name), Op{Op: "add", Path: "/webhooks/" + strconv.Itoa(i) + "/failurePolicy", Value: admissionregv1.Fail})
		}
	}
	if len(ops) > 0 {
		rv, err := p.patch(ctx, kindValidating, name, cfg.ResourceVersion, ops)
		if err != nil {
			return err
		}
		if caChanged > 0 {
			p.log.Info("patched caBundle", "kind", kindValidating, "name", name, "webhooks", caChanged, "resourceVersion", rv)
		}
		if failClosed {
			p.log.Info("validation webhook serves; failurePolicy set to Fail", "kind", kindValidating, "name", name, "resourceVersion", rv)
		}
	}
	return notReady
}

// ready asks Ready once until it first succeeds; after that validation is
// known to serve and every configuration is switched.
func (p *ConfigurationPatcher) ready(ctx context.Context, cfg *admissionregv1.ValidatingWebhookConfiguration) (bool, error) {
	if p.readyOnce.Load() {
		return true, nil
	}
	if err := p.o.Ready(ctx, cfg); err != nil {
		p.log.Info("not yet switching validation to fail closed", "name", cfg.Name, "reason", err.Error())
		return false, fmt.Errorf("%w: %v", errNotReady, err)
	}
	p.log.Info("validation webhook ready; switching to fail closed", "name", cfg.Name)
	p.readyOnce.Store(true)
	p.enqueueAll()
	return true, nil
}

// patch applies ops as a JSON patch to the version from of a configuration
// and returns the new resourceVersion.
func (p *ConfigurationPatcher) patch(ctx context.Context, kind, name, from string, ops []Op) (string, error) {
	body, err := json.Marshal(ops)
	if err != nil {
		return "", fmt.Errorf("encode patch of %s %s: %w", kind, name, err)
	}
	var obj interface {
		runtime.Object
		metav1.Object
	}
	resource := "validatingwebhookconfigurations"
	obj = &admissionregv1.ValidatingWebhookConfiguration{}
	if kind == kindMutating {
		resource, obj = "mutatingwebhookconfigurations", &admissionregv1.MutatingWebhookConfiguration{}
	}
	err = p.o.Client.Patch(types.JSONPatchType).Resource(resource).Name(name).
		VersionedParams(&metav1.PatchOptions{FieldManager: "istiod"}, metav1.ParameterCodec).
		Body(body).Do(ctx).Into(obj)
	if err != nil {
		return "", fmt.Errorf("patch %s %s (resourceVersion %s): %w", kind, name, from, err)
	}
	p.patched[configKey{kind, name}] = from
	return obj.GetResourceVersion(), nil
}

// caBundleOps set webhook i's caBundle, guarded by a test of its name so
// that a configuration reordered meanwhile is not patched at the wrong
// index (the patch then fails and the next event retries).
func caBundleOps(i int, name string, root []byte) []Op {
	return []Op{nameTest(i, name), {Op: "add", Path: "/webhooks/" + strconv.Itoa(i) + "/clientConfig/caBundle", Value: root}}
}

func nameTest(i int, name string) Op {
	return Op{Op: "test", Path: "/webhooks/" + strconv.Itoa(i) + "/name", Value: name}
}

func meta(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return m, nil
}

// VerifyCABundle checks that pem starts with a parseable certificate, as
// Istio checks a bundle before writing it into a webhook configuration.
func VerifyCABundle(b []byte) error {
	block, _ := pem.Decode(b)
	if block == nil {
		return errors.New("caBundle: no PEM block")
	}
	if block.Type != "CERTIFICATE" {
		return fmt.Errorf("caBundle: PEM block %q, want CERTIFICATE", block.Type)
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return fmt.Errorf("caBundle: %w", err)
	}
	return nil
}
