package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProbeLabels(t *testing.T) {
	for _, tc := range []struct {
		name string
		rev  string
		cfg  *admissionregv1.ValidatingWebhookConfiguration
		want map[string]string
	}{
		{"Skiff's default revision: unlabelled objects", "default", ValidatingConfiguration(ConfigurationOptions{}), map[string]string{}},
		{"Skiff's canary", "canary", ValidatingConfiguration(ConfigurationOptions{Revision: "canary"}), map[string]string{LabelRevision: "canary"}},
		{"Istio's chart: istio.io/rev In [default]", "default", &admissionregv1.ValidatingWebhookConfiguration{Webhooks: []admissionregv1.ValidatingWebhook{{
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(LabelRevision, metav1.LabelSelectorOpIn, "default")}},
		}}}, map[string]string{LabelRevision: "default"}},
		{"no selector", "default", &admissionregv1.ValidatingWebhookConfiguration{Webhooks: []admissionregv1.ValidatingWebhook{{}}}, map[string]string{LabelRevision: "default"}},
		{"no webhooks", "default", &admissionregv1.ValidatingWebhookConfiguration{}, map[string]string{LabelRevision: "default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, probeLabels(tc.cfg, tc.rev)); d != "" {
				t.Errorf("probe labels (-want +got):\n%s", d)
			}
		})
	}
}

func TestVerifyCABundle(t *testing.T) {
	for _, tc := range []struct {
		name, pem string
		ok        bool
	}{
		{"empty", "", false},
		{"not PEM", "root", false},
		{"a key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", false},
		{"bad certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := VerifyCABundle([]byte(tc.pem)); (err == nil) != tc.ok {
				t.Errorf("VerifyCABundle: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
