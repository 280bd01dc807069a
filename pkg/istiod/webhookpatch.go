package istiod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
)

// WebhookPatch says which admission webhook configurations istiod keeps
// (their caBundle, and validation's failurePolicy), from Istio's
// environment variables.
type WebhookPatch struct {
	// Revision is istiod's revision (REVISION; "default"): only
	// configurations labelled istio.io/rev=Revision are patched.
	Revision string
	// Namespace is istiod's namespace (POD_NAMESPACE), where the
	// validation readiness probe is dry-run.
	Namespace string
	// Injection and Validation patch the MutatingWebhookConfigurations and
	// the ValidatingWebhookConfigurations; Istio turns them off when
	// INJECTION_WEBHOOK_CONFIG_NAME or VALIDATION_WEBHOOK_CONFIG_NAME is
	// set to "" (a low-privilege istiod whose configurations another tool
	// keeps).
	Injection, Validation bool
}

// WebhookPatchFromEnv reads REVISION, POD_NAMESPACE (else namespace, the
// --namespace flag), INJECTION_WEBHOOK_CONFIG_NAME and
// VALIDATION_WEBHOOK_CONFIG_NAME with lookup (os.LookupEnv). Errors name
// the variable and its value.
func WebhookPatchFromEnv(lookup func(string) (string, bool), namespace string) (WebhookPatch, error) {
	p := WebhookPatch{Revision: "default", Namespace: namespace, Injection: true, Validation: true}
	if v, ok := lookup("REVISION"); ok && v != "" {
		p.Revision = v
	}
	if v, ok := lookup("POD_NAMESPACE"); ok && v != "" {
		p.Namespace = v
	}
	if v, ok := lookup("INJECTION_WEBHOOK_CONFIG_NAME"); ok && v == "" {
		p.Injection = false
	}
	if v, ok := lookup("VALIDATION_WEBHOOK_CONFIG_NAME"); ok && v == "" {
		p.Validation = false
	}
	var errs []error
	if msgs := validation.IsValidLabelValue(p.Revision); len(msgs) > 0 || p.Revision == "" {
		errs = append(errs, fmt.Errorf("REVISION=%q: not a label value: %v", p.Revision, msgs))
	}
	if msgs := validation.IsDNS1123Label(p.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("POD_NAMESPACE=%q: not a namespace name: %v", p.Namespace, msgs))
	}
	return p, errors.Join(errs...)
}

// StartWebhookPatcher keeps the caBundle of the revision's webhook
// configurations equal to the CA's root, and switches validation's
// failurePolicy to Fail once the validation webhook refuses a dry-run of
// invalid config through the API server, until ctx ends (see
// webhook.ConfigurationPatcher). It does nothing in file mode
// (cfg.ConfigDir set), without the CA, or when the webhooks are not served
// (w.Addr empty): call it after StartWebhooks. Every replica patches, as
// Istio 1.31's do, with no election: the patches are the same from each
// (the CA root and validation's readiness are shared), a replica whose
// informer holds what it would write writes nothing, and a new replica
// never waits for the lease of one that vanished without releasing it (as
// after helm uninstall, which deletes istiod's RBAC before the pod stops).
func StartWebhookPatcher(ctx context.Context, cfg Config, w Webhooks, p WebhookPatch, authority *ca.CA, log *slog.Logger) error {
	if cfg.ConfigDir != "" || w.Addr == "" || authority == nil || (!p.Injection && !p.Validation) {
		return nil
	}
	client, err := kubeClients(cfg)
	if err != nil {
		return fmt.Errorf("webhook patcher: %w", err)
	}
	o := webhook.PatcherOptions{
		Client:         client.Admission,
		Revision:       p.Revision,
		Roots:          authority,
		Ready:          webhook.DryRunReady(client.Networking, p.Namespace, p.Revision),
		Log:            log,
		SkipMutating:   !p.Injection,
		SkipValidating: !p.Validation,
	}
	go func() {
		// A patcher runs once and reconciles every configuration as its
		// informers sync. (Its options cannot be refused: Client and
		// Roots are set above.)
		patcher, err := webhook.NewConfigurationPatcher(o)
		if err == nil {
			err = patcher.Run(ctx)
		}
		if err != nil && ctx.Err() == nil {
			log.Error("webhook configuration patcher stopped", "err", err)
		}
	}()
	return nil
}
