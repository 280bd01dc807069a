package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckValidation waits for istiod to have filled in the caBundle of its
// webhook configurations and switched validation to fail closed, then
// writes an invalid VirtualService: the API server refuses it.
func (c *Cluster) CheckValidation(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	adm := c.Kube.Client.AdmissionregistrationV1()
	err := kubePoll(ctx, "caBundle in both webhook configurations, validation at failurePolicy Fail", func() (bool, error) {
		v, err := adm.ValidatingWebhookConfigurations().Get(ctx, "istio-validator-"+IstioNamespace, metav1.GetOptions{})
		if err != nil || len(v.Webhooks) == 0 {
			return false, nil
		}
		for _, w := range v.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 || w.FailurePolicy == nil || *w.FailurePolicy != "Fail" {
				return false, nil
			}
		}
		m, err := adm.MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
		if err != nil || len(m.Webhooks) == 0 {
			return false, nil
		}
		for _, w := range m.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	c.Say("istiod filled in the caBundle of its webhook configurations and set validation to failurePolicy Fail")
	bad := []byte(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: invalid, namespace: demo}
spec:
  http:
  - route:
    - destination: {host: reviews}
`)
	err = c.Kube.Apply(ctx, bad)
	switch {
	case err == nil:
		return errors.New("an invalid VirtualService (no hosts) was admitted")
	case strings.Contains(err.Error(), "denied the request"):
		c.Say("an invalid VirtualService is refused:\n  %v", err)
		return nil
	default:
		return fmt.Errorf("invalid VirtualService: %w, want the validation webhook's refusal", err)
	}
}
