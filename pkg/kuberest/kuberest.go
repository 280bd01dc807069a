// Package kuberest makes REST clients of the Kubernetes and Istio API
// groups a binary reads and writes, on a scheme that registers those groups
// only. client-go's clientsets register all of Kubernetes' groups (57 of
// them), and every registered type keeps its generated code in the binary;
// istiod and istioctl need seven, install-cni one.
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

// group is one group version a client is made for.
type group struct {
	dst *rest.Interface
	gv  schema.GroupVersion
	add func(*runtime.Scheme) error
	pb  bool // protobuf when asked for: Kubernetes' own groups
}

// New makes Clients of the seven groups on rc. protobuf asks Kubernetes' own groups
// for protobuf (the API server serves custom resources, Istio's, as JSON
// only).
func New(rc *rest.Config, protobuf bool) (*Clients, error) {
	var c Clients
	err := fill(rc, protobuf, []group{
		{&c.Core, corev1.SchemeGroupVersion, corev1.AddToScheme, true},
		{&c.Discovery, discoveryv1.SchemeGroupVersion, discoveryv1.AddToScheme, true},
		{&c.Admission, admissionregistrationv1.SchemeGroupVersion, admissionregistrationv1.AddToScheme, true},
		{&c.Coordination, coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme, true},
		{&c.Authentication, authenticationv1.SchemeGroupVersion, authenticationv1.AddToScheme, true},
		{&c.Networking, networkingv1.SchemeGroupVersion, networkingv1.AddToScheme, false},
		{&c.Security, securityv1.SchemeGroupVersion, securityv1.AddToScheme, false},
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// NewCore makes a REST client of core/v1 alone on rc, for binaries that
// read and write pods and events only (install-cni).
func NewCore(rc *rest.Config, protobuf bool) (rest.Interface, error) {
	var core rest.Interface
	if err := fill(rc, protobuf, []group{{&core, corev1.SchemeGroupVersion, corev1.AddToScheme, true}}); err != nil {
		return nil, err
	}
	return core, nil
}

// fill sets each group's client, on a scheme of those groups, one HTTP
// client and one rate limiter.
func fill(rc *rest.Config, protobuf bool, groups []group) error {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	for _, g := range groups {
		if err := g.add(scheme); err != nil {
			return fmt.Errorf("scheme of %s: %w", g.gv, err)
		}
	}
	codecs := serializer.NewCodecFactory(scheme)

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
		return fmt.Errorf("kubernetes HTTP client: %w", err)
	}
	for _, g := range groups {
		if *g.dst, err = client(base, hc, codecs, g.gv, protobuf && g.pb); err != nil {
			return fmt.Errorf("kubernetes client of %s: %w", g.gv, err)
		}
	}
	return nil
}

func client(base *rest.Config, hc *http.Client, codecs serializer.CodecFactory, gv schema.GroupVersion, protobuf bool) (rest.Interface, error) {
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
