// Package crdtest installs minimal Istio CRDs into a test API server, so
// the Kubernetes registry can be tested against a real kube-apiserver.
package crdtest

import (
	"context"
	"fmt"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// IstioKinds are the Istio kinds the registry watches, with their plurals.
var IstioKinds = map[string]string{
	"ServiceEntry":    "serviceentries",
	"WorkloadEntry":   "workloadentries",
	"VirtualService":  "virtualservices",
	"DestinationRule": "destinationrules",
	"Sidecar":         "sidecars",
}

// SecurityKinds are the security.istio.io kinds the registry watches, with
// their plurals; their CRDs serve v1 (stored) and v1beta1, as Istio's do.
var SecurityKinds = map[string]string{
	"PeerAuthentication":    "peerauthentications",
	"AuthorizationPolicy":   "authorizationpolicies",
	"RequestAuthentication": "requestauthentications",
}

// InstallCRDs creates minimal CRDs (networking.istio.io/v1 for IstioKinds,
// security.istio.io/v1 and v1beta1 for SecurityKinds; schema-less: spec and
// status keep unknown fields) and waits until they
// are established. It is for test clusters and demos; real clusters install
// Istio's own CRDs, which validate.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	cs, err := apiext.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	open := true
	schema := &apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
		"spec":   {Type: "object", XPreserveUnknownFields: &open},
		"status": {Type: "object", XPreserveUnknownFields: &open},
	}}
	var names []string
	for _, g := range []struct {
		group    string
		kinds    map[string]string
		versions []string
	}{{"networking.istio.io", IstioKinds, []string{"v1"}}, {"security.istio.io", SecurityKinds, []string{"v1", "v1beta1"}}} {
		for kind, plural := range g.kinds {
			crd := &apiextv1.CustomResourceDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: plural + "." + g.group},
				Spec: apiextv1.CustomResourceDefinitionSpec{
					Group: g.group,
					Names: apiextv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: lower(kind)},
					Scope: apiextv1.NamespaceScoped,
				},
			}
			for i, v := range g.versions {
				crd.Spec.Versions = append(crd.Spec.Versions, apiextv1.CustomResourceDefinitionVersion{
					Name: v, Served: true, Storage: i == 0,
					Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: schema},
				})
			}
			if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create CRD %s: %w", crd.Name, err)
			}
			names = append(names, crd.Name)
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
