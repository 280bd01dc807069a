package analyze

import (
	"context"
	"fmt"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// unreadResources are the Istio kinds istiod does not read, listed by
// metadata only (one message each).
var unreadResources = []struct {
	kind model.Kind
	gvr  schema.GroupVersionResource
}{
	{"EnvoyFilter", schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1alpha3", Resource: "envoyfilters"}},
	{"ProxyConfig", schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1beta1", Resource: "proxyconfigs"}},
	{"WorkloadGroup", schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "workloadgroups"}},
	{"WasmPlugin", schema.GroupVersionResource{Group: "extensions.istio.io", Version: "v1alpha1", Resource: "wasmplugins"}},
	{"Telemetry", schema.GroupVersionResource{Group: "telemetry.istio.io", Version: "v1", Resource: "telemetries"}},
}

// absent reports a list error that means the kind is not installed.
func absent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// listCluster reads every object the analyzers use from all namespaces.
// A kind whose CRD is not installed has no objects.
func listCluster(ctx context.Context, c *cluster.Cluster) (*analysis.Set, error) {
	s := &analysis.Set{}
	all := metav1.ListOptions{}
	var svcs corev1.ServiceList
	if err := list(ctx, c.Clients.Core, "services", &svcs); err != nil {
		return nil, err
	}
	for i := range svcs.Items {
		s.Services = append(s.Services, &svcs.Items[i])
	}
	var pods corev1.PodList
	if err := list(ctx, c.Clients.Core, "pods", &pods); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		s.Pods = append(s.Pods, model.PodOf(&pods.Items[i]))
	}
	net, sec := c.Clients.Networking, c.Clients.Security
	var (
		vss  networking.VirtualServiceList
		drs  networking.DestinationRuleList
		ses  networking.ServiceEntryList
		wes  networking.WorkloadEntryList
		scs  networking.SidecarList
		gws  networking.GatewayList
		pas  security.PeerAuthenticationList
		aps  security.AuthorizationPolicyList
		ras  security.RequestAuthenticationList
		kind = []struct {
			client   rest.Interface
			resource string
			into     runtime.Object
		}{
			{net, "virtualservices", &vss}, {net, "destinationrules", &drs}, {net, "serviceentries", &ses},
			{net, "workloadentries", &wes}, {net, "sidecars", &scs}, {net, "gateways", &gws},
			{sec, "peerauthentications", &pas}, {sec, "authorizationpolicies", &aps}, {sec, "requestauthentications", &ras},
		}
	)
	for _, k := range kind {
		if err := list(ctx, k.client, k.resource, k.into); err != nil && !absent(err) {
			return nil, err
		}
	}
	s.VirtualServices, s.DestinationRules, s.ServiceEntries = vss.Items, drs.Items, ses.Items
	s.WorkloadEntries, s.Sidecars = wes.Items, scs.Items
	s.Gateways = append([]*networking.Gateway{}, gws.Items...) // known, even if none
	for _, g := range s.Gateways {
		s.Unread = append(s.Unread, model.Key{Kind: analysis.KindGateway, Namespace: g.Namespace, Name: g.Name})
	}
	s.PeerAuthentications, s.AuthorizationPolicies, s.RequestAuthentications = pas.Items, aps.Items, ras.Items
	md, err := metadata.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	for _, u := range unreadResources {
		l, err := md.Resource(u.gvr).Namespace("").List(ctx, all)
		if absent(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", u.gvr.Resource, err)
		}
		for _, o := range l.Items {
			s.Unread = append(s.Unread, model.Key{Kind: u.kind, Namespace: o.Namespace, Name: o.Name})
		}
	}
	return s, nil
}

// list reads every object of resource, in all namespaces, into into.
func list(ctx context.Context, client rest.Interface, resource string, into runtime.Object) error {
	if err := client.Get().Resource(resource).Do(ctx).Into(into); err != nil {
		return fmt.Errorf("list %s: %w", resource, err)
	}
	return nil
}
