package webhook

import (
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label keys that select pods and namespaces for injection, as in Istio.
const (
	LabelInjection = "istio-injection"
	LabelRevision  = "istio.io/rev"
	LabelInject    = "sidecar.istio.io/inject"
)

// ConfigurationOptions describes where the API server reaches the webhooks.
type ConfigurationOptions struct {
	// Revision is the control plane revision ("" or "default" for the default).
	Revision string
	// IstioNamespace is istiod's namespace (istio-system).
	IstioNamespace string
	// CABundle verifies the webhook server's certificate (the CA's root).
	CABundle []byte
	// URL, when set, is the base URL of the webhook server
	// ("https://127.0.0.1:15017"); otherwise the API server calls the
	// istiod Service on port 443.
	URL string
	// ServiceName is istiod's Service ("istiod" or "istiod-REV").
	ServiceName string
	// InjectionFailurePolicy and ValidationFailurePolicy default to Fail.
	InjectionFailurePolicy, ValidationFailurePolicy admissionregv1.FailurePolicyType
	// EnableNamespacesByDefault injects in every namespace not labelled
	// istio-injection=disabled (kube-system and kube-public excepted).
	EnableNamespacesByDefault bool
}

func (o *ConfigurationOptions) defaults() {
	if o.Revision == "" {
		o.Revision = "default"
	}
	if o.IstioNamespace == "" {
		o.IstioNamespace = "istio-system"
	}
	if o.ServiceName == "" {
		o.ServiceName = "istiod"
		if o.Revision != "default" {
			o.ServiceName += "-" + o.Revision
		}
	}
	if o.InjectionFailurePolicy == "" {
		o.InjectionFailurePolicy = admissionregv1.Fail
	}
	if o.ValidationFailurePolicy == "" {
		o.ValidationFailurePolicy = admissionregv1.Fail
	}
}

func (o *ConfigurationOptions) clientConfig(path string) admissionregv1.WebhookClientConfig {
	cc := admissionregv1.WebhookClientConfig{CABundle: o.CABundle}
	if o.URL != "" {
		u := o.URL + path
		cc.URL = &u
		return cc
	}
	port := int32(443)
	cc.Service = &admissionregv1.ServiceReference{Namespace: o.IstioNamespace, Name: o.ServiceName, Path: &path, Port: &port}
	return cc
}

func req(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

// suffix is "" for the default revision, else "-REV".
func (o *ConfigurationOptions) suffix() string {
	if o.Revision == "default" {
		return ""
	}
	return "-" + o.Revision
}

// MutatingConfiguration returns the injection webhook configuration, with
// Istio's selectors: a namespace labelled istio.io/rev=REV (and not
// istio-injection), or a pod labelled istio.io/rev=REV in an unlabelled
// namespace; for the default revision also a namespace labelled
// istio-injection=enabled, or a pod labelled sidecar.istio.io/inject=true
// in an unlabelled namespace. A pod labelled sidecar.istio.io/inject=false
// is never sent. Only pod CREATE is intercepted.
func MutatingConfiguration(o ConfigurationOptions) *admissionregv1.MutatingWebhookConfiguration {
	o.defaults()
	none := admissionregv1.SideEffectClassNone
	never := admissionregv1.NeverReinvocationPolicy
	timeout := int32(10)
	base := admissionregv1.MutatingWebhook{
		ClientConfig: o.clientConfig(InjectPath),
		Rules: []admissionregv1.RuleWithOperations{{
			Operations: []admissionregv1.OperationType{admissionregv1.Create},
			Rule:       admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		FailurePolicy: &o.InjectionFailurePolicy, SideEffects: &none, ReinvocationPolicy: &never,
		AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: &timeout,
	}
	hook := func(name string, ns, obj []metav1.LabelSelectorRequirement) admissionregv1.MutatingWebhook {
		w := *base.DeepCopy()
		w.Name = name
		w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: ns}
		w.ObjectSelector = &metav1.LabelSelector{MatchExpressions: obj}
		return w
	}
	notFalse := req(LabelInject, metav1.LabelSelectorOpNotIn, "false")
	hooks := []admissionregv1.MutatingWebhook{
		hook("rev.namespace.sidecar-injector.istio.io",
			[]metav1.LabelSelectorRequirement{req(LabelRevision, metav1.LabelSelectorOpIn, o.Revision), req(LabelInjection, metav1.LabelSelectorOpDoesNotExist)},
			[]metav1.LabelSelectorRequirement{notFalse}),
		hook("rev.object.sidecar-injector.istio.io",
			[]metav1.LabelSelectorRequirement{req(LabelRevision, metav1.LabelSelectorOpDoesNotExist), req(LabelInjection, metav1.LabelSelectorOpDoesNotExist)},
			[]metav1.LabelSelectorRequirement{notFalse, req(LabelRevision, metav1.LabelSelectorOpIn, o.Revision)}),
	}
	if o.Revision == "default" {
		nsSel := []metav1.LabelSelectorRequirement{req(LabelInjection, metav1.LabelSelectorOpIn, "enabled")}
		if o.EnableNamespacesByDefault {
			nsSel = []metav1.LabelSelectorRequirement{
				req(LabelInjection, metav1.LabelSelectorOpNotIn, "disabled"),
				req(LabelRevision, metav1.LabelSelectorOpDoesNotExist),
				req("kubernetes.io/metadata.name", metav1.LabelSelectorOpNotIn, "kube-system", "kube-public", "kube-node-lease", "local-path-storage"),
			}
		}
		hooks = append(hooks,
			hook("namespace.sidecar-injector.istio.io", nsSel, []metav1.LabelSelectorRequirement{notFalse}),
			hook("object.sidecar-injector.istio.io",
				[]metav1.LabelSelectorRequirement{req(LabelInjection, metav1.LabelSelectorOpDoesNotExist), req(LabelRevision, metav1.LabelSelectorOpDoesNotExist)},
				[]metav1.LabelSelectorRequirement{req(LabelInject, metav1.LabelSelectorOpIn, "true"), req(LabelRevision, metav1.LabelSelectorOpDoesNotExist)}),
		)
		if o.EnableNamespacesByDefault {
			hooks = hooks[:len(hooks)-1] // the namespace hook already covers unlabelled namespaces
		}
	}
	return &admissionregv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector" + o.suffix(), Labels: map[string]string{LabelRevision: o.Revision}},
		Webhooks:   hooks,
	}
}

// ValidatingConfiguration returns the validation webhook configuration:
// CREATE and UPDATE of every kind in networking.istio.io and
// security.istio.io (objects labelled for another revision excepted).
func ValidatingConfiguration(o ConfigurationOptions) *admissionregv1.ValidatingWebhookConfiguration {
	o.defaults()
	none := admissionregv1.SideEffectClassNone
	timeout := int32(10)
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(LabelRevision, metav1.LabelSelectorOpDoesNotExist)}}
	if o.Revision != "default" {
		sel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(LabelRevision, metav1.LabelSelectorOpIn, o.Revision)}}
	}
	return &admissionregv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "istio-validator" + o.suffix() + "-" + o.IstioNamespace, Labels: map[string]string{LabelRevision: o.Revision}},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:         "rev.validation.istio.io",
			ClientConfig: o.clientConfig(ValidatePath),
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
				Rule:       admissionregv1.Rule{APIGroups: []string{"networking.istio.io", "security.istio.io"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
			}},
			ObjectSelector: sel, FailurePolicy: &o.ValidationFailurePolicy, SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: &timeout,
		}},
	}
}
