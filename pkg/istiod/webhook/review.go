package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
)

// The AdmissionReview API versions the webhooks answer (same JSON shape).
var reviewVersions = map[string]bool{"admission.k8s.io/v1": true, "admission.k8s.io/v1beta1": true}

// RequestError is an HTTP request the webhook cannot answer with an
// AdmissionReview (it is answered with Status and Error's text).
type RequestError struct {
	// Status is the HTTP status code to answer with.
	Status int
	// Err is the reason, sent as the body.
	Err error
}

// Error returns the reason.
func (e *RequestError) Error() string { return e.Err.Error() }

// Unwrap returns the reason.
func (e *RequestError) Unwrap() error { return e.Err }

// ParseReview decodes an AdmissionReview request body. It refuses bodies
// that are not JSON, reviews of an unknown apiVersion or kind, and reviews
// without a request or UID.
func ParseReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &RequestError{Status: http.StatusBadRequest, Err: fmt.Errorf("not an AdmissionReview: %w", err)}
	}
	if !reviewVersions[r.APIVersion] || r.Kind != "AdmissionReview" {
		return nil, &RequestError{Status: http.StatusBadRequest, Err: fmt.Errorf("apiVersion %q kind %q: want admission.k8s.io/v1 AdmissionReview", r.APIVersion, r.Kind)}
	}
	if r.Request == nil {
		return nil, &RequestError{Status: http.StatusBadRequest, Err: errors.New("AdmissionReview has no request")}
	}
	if r.Request.UID == "" {
		return nil, &RequestError{Status: http.StatusBadRequest, Err: errors.New("AdmissionReview request has no uid")}
	}
	return &r, nil
}

// deny builds a refusal with a reason the API server shows the user.
func deny(code int32, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Message: msg, Reason: metav1.StatusReasonBadRequest,
	}}
}

// allow builds an acceptance.
func allow() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// injectPod answers one /inject request.
func (s *Server) injectPod(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != podResource || req.SubResource != "" || req.Operation != admissionv1.Create {
		return allow()
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return deny(http.StatusBadRequest, "sidecar injection: the object is not a Pod: "+err.Error())
	}
	res, err := s.opts.Injector.Inject(&pod, req.Namespace)
	if err != nil {
		var ae *inject.AnnotationError
		if errors.As(err, &ae) {
			return deny(http.StatusBadRequest, "sidecar injection refused: "+err.Error())
		}
		s.log.Error("injection failed", "namespace", req.Namespace, "pod", podName(&pod), "err", err)
		return deny(http.StatusInternalServerError, "sidecar injection failed: "+err.Error())
	}
	resp := allow()
	resp.Warnings = res.Warnings
	if !res.Injected {
		s.log.Debug("not injected", "namespace", req.Namespace, "pod", podName(&pod), "reason", res.Reason)
		return resp
	}
	// Both sides are re-encoded from the same typed decoding, so fields this
	// build does not know are in neither and the patch leaves them alone.
	from, err := json.Marshal(&pod)
	if err != nil {
		return deny(http.StatusInternalServerError, "sidecar injection: encode pod: "+err.Error())
	}
	to, err := json.Marshal(res.Pod)
	if err != nil {
		return deny(http.StatusInternalServerError, "sidecar injection: encode pod: "+err.Error())
	}
	ops, err := CreatePatch(from, to)
	if err == nil {
		ops, err = Rebase(ops, req.Object.Raw, to)
	}
	if err != nil {
		return deny(http.StatusInternalServerError, "sidecar injection: "+err.Error())
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return deny(http.StatusInternalServerError, "sidecar injection: encode patch: "+err.Error())
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	s.log.Info("injected", "namespace", req.Namespace, "pod", podName(&pod), "reason", res.Reason)
	return resp
}

func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName + "*"
}

// validate answers one /validate request.
func (s *Server) validate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow()
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if err := s.opts.Validator.ValidateJSON(gvk, req.Namespace, req.Object.Raw); err != nil {
		s.log.Info("refused config", "kind", gvk.Kind, "namespace", req.Namespace, "name", req.Name, "err", err)
		var ve *validation.Error
		if errors.As(err, &ve) {
			return deny(http.StatusBadRequest, "configuration is invalid: "+err.Error())
		}
		return deny(http.StatusBadRequest, err.Error())
	}
	if s.opts.Analyze == nil {
		return allow()
	}
	warnings, refusal := s.opts.Analyze(req)
	if refusal != "" {
		s.log.Info("refused config", "kind", gvk.Kind, "namespace", req.Namespace, "name", req.Name, "err", refusal)
		return deny(http.StatusBadRequest, refusal)
	}
	resp := allow()
	resp.Warnings = warnings
	return resp
}
