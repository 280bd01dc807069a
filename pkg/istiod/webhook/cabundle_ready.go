package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// AnnotationAlwaysReject asks Istio's validation webhook to refuse an
// object whatever it holds (istio.io/alwaysReject); the readiness probe
// carries it so that Istio's validator refuses it too.
const AnnotationAlwaysReject = "istio.io/alwaysReject"

// ProbeName is the name of the object the readiness probe dry-runs.
const ProbeName = "istiod-validation-probe"

// DryRunReady returns the ReadyFunc istiod uses: like Istio's validation
// controller it asks the API server to create, as a dry run, an invalid
// object in namespace that the configuration's webhook selects, and calls
// validation ready when the webhook denies it — proof that the API server
// reaches the webhook and trusts its certificate. Istio probes with a
// Gateway; Skiff's validator does not check Gateways, so the probe is a
// VirtualService without hosts (refused by either validator, and also
// annotated to be always rejected). A cluster without the VirtualService
// CRD, or with a webhook that does not support dry runs, counts as ready,
// as in Istio. client is a REST client of networking.istio.io/v1 (an Istio
// clientset's NetworkingV1().RESTClient(), say).
func DryRunReady(client rest.Interface, namespace, revision string) ReadyFunc {
	if revision == "" {
		revision = "default"
	}
	return func(ctx context.Context, cfg *admissionregv1.ValidatingWebhookConfiguration) error {
		vs := &networking.VirtualService{
			ObjectMeta: metav1.ObjectMeta{
				Name:        ProbeName,
				Namespace:   namespace,
				Labels:      probeLabels(cfg, revision),
				Annotations: map[string]string{AnnotationAlwaysReject: "true"},
			},
			Spec: apinet.VirtualService{},
		}
		err := client.Post().Namespace(namespace).Resource("virtualservices").
			VersionedParams(&metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}, metav1.ParameterCodec).
			Body(vs).Do(ctx).Error()
		if apierrors.IsAlreadyExists(err) {
			err = client.Put().Namespace(namespace).Resource("virtualservices").Name(ProbeName).
				VersionedParams(&metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, metav1.ParameterCodec).
				Body(vs).Do(ctx).Error()
		}
		if err == nil {
			return errors.New("invalid VirtualService not refused (dry run)")
		}
		msg := err.Error()
		switch {
		case strings.Contains(msg, "denied the request"):
			return nil
		case apierrors.IsNotFound(err) && strings.Contains(msg, "the server could not find the requested resource"):
			return nil // no CRD: nothing to validate
		case strings.Contains(msg, "does not support dry run"):
			return nil
		}
		return fmt.Errorf("invalid VirtualService refused for another reason: %w", err)
	}
}

// probeLabels returns labels the configuration's first webhook selects:
// Istio's chart selects istio.io/rev=REV, Skiff's default revision objects
// without istio.io/rev.
func probeLabels(cfg *admissionregv1.ValidatingWebhookConfiguration, revision string) map[string]string {
	withRev := map[string]string{LabelRevision: revision}
	if len(cfg.Webhooks) == 0 || cfg.Webhooks[0].ObjectSelector == nil {
		return withRev
	}
	sel, err := metav1.LabelSelectorAsSelector(cfg.Webhooks[0].ObjectSelector)
	if err != nil {
		return withRev
	}
	for _, l := range []map[string]string{withRev, {}} {
		if sel.Matches(labels.Set(l)) {
			return l
		}
	}
	return withRev
}
