// Package kuberest makes REST clients of the Kubernetes and Istio API
// groups istiod reads and writes, on a scheme that registers those groups
// only. client-go's clientsets register all of Kubernetes' groups (57 of
// them), and every registered type keeps its generated code in the binary;
// istiod needs seven.
package kuberest

import (
	"fmt"
	"net/http"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Scheme holds the groups of Clients.
var Scheme = runtime.NewScheme()

// codecs encode and decode them: JSON, and protobuf for Kubernetes' own.
var codecs = serializer.NewCodecFactory(Scheme)

func init() {
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, discoveryv1.AddToScheme, admissionregistrationv1.AddToScheme,
		coordinationv1.AddToScheme, authenticationv1.AddToScheme, networkingv1.AddToScheme, securityv1.AddToScheme,
	} {
		if err := add(Scheme); err != nil {
			panic(err) // a programming error: the groups register once
		}
	}
}

// Clients are REST clients of one group version each, sharing one HTTP
// client and one rate limiter, as a clientset's do.
type Clients struct {
	Core           rest.Interface // core/v1
	Discovery      rest.Interface // discovery.k8s.io/v1
	Admission      rest.Interface // admissionregistration.k8s.io/v1
	Coordination   rest.Interface // coordination.k8s.io/v1
	Authentication rest.Interface // authentication.k8s.io/v1
	Networking     rest.Interface // networking.istio.io/v1
	Security       rest.Interface // security.istio.io/v1
}

// New makes Clients on rc. protobuf asks Kubernetes' own groups for
// protobuf (the API server serves custom resources, Istio's, as JSON only).
func New(rc *rest.Config, protobuf bool) (*Clients, error) {
	base := rest.CopyConfig(rc)
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if base.RateLimiter == nil && base.QPS > 0 {
		burst := base.Burst
		if burst <= 0 {
			burst = 10
		}
		base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(base.QPS, burst)
	}
	hc, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("kubernetes HTTP client: %w", err)
	}
	var c Clients
	for _, g := range []struct {
		dst *rest.Interface
		gv  schema.GroupVersion
		pb  bool
	}{
		{&c.Core, corev1.SchemeGroupVersion, protobuf},
		{&c.Discovery, discoveryv1.SchemeGroupVersion, protobuf},
		{&c.Admission, admissionregistrationv1.SchemeGroupVersion, protobuf},
		{&c.Coordination, coordinationv1.SchemeGroupVersion, protobuf},
		{&c.Authentication, authenticationv1.SchemeGroupVersion, protobuf},
		{&c.Networking, networkingv1.SchemeGroupVersion, false},
		{&c.Security, securityv1.SchemeGroupVersion, false},
	} {
		if *g.dst, err = client(base, hc, g.gv, g.pb); err != nil {
			return nil, fmt.Errorf("kubernetes client of %s: %w", g.gv, err)
		}
	}
	return &c, nil
}

func client(base *rest.Config, hc *http.Client, gv schema.GroupVersion, protobuf bool) (rest.Interface, error) {
	c := rest.CopyConfig(base)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if protobuf {
		c.ContentType = runtime.ContentTypeProtobuf
		c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	} else {
		c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, ""
	}
	return rest.RESTClientForConfigAndClient(c, hc)
}
