// Package webhook serves istiod's admission webhooks over HTTPS (port 15017
// in istiod): /inject, a mutating admission.k8s.io/v1 webhook that adds the
// sidecar to pods (pkg/istiod/inject) as a JSON patch, and /validate, a
// validating webhook for Istio configuration (pkg/istiod/validation).
//
// Wiring it into istiod:
//
//	inj, _ := inject.New(injectCfg, log)              // inject.LoadFiles(...) for a mounted ConfigMap
//	srv := webhook.New(webhook.Options{
//		Injector:  inj,
//		Validator: &validation.Validator{Subsets: kubeSubsets}, // optional lookup
//		Log:       log,
//	})
//	err := srv.ListenAndServe(ctx, ":15017", ca.ServerTLSConfig())
//
// or mount srv.Handler() on a server of your own. Requests that do not
// parse get HTTP 400 (the API server then applies the webhook's
// failurePolicy); a parsed request always gets an AdmissionReview answer:
// allowed (with a patch when injected) or denied with the reason. A panic
// in a handler is answered with HTTP 500, never a partial patch.
package webhook
