package analyze

import (
	"context"
	"fmt"

	networking "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

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
	svcs, err := c.Client.CoreV1().Services("").List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	for i := range svcs.Items {
		s.Services = append(s.Services, &svcs.Items[i])
	}
	pods, err := c.Client.CoreV1().Pods("").List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		s.Pods = append(s.Pods, model.PodOf(&pods.Items[i]))
	}
	ic, err := istioclient.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("istio client: %w", err)
	}
	net, sec := ic.NetworkingV1(), ic.SecurityV1()
	steps := []struct {
		what string
		run  func() error
	}{
		{"virtualservices", func() error {
			l, err := net.VirtualServices("").List(ctx, all)
			if err == nil {
				s.VirtualServices = l.Items
			}
			return err
		}},
		{"destinationrules", func() error {
			l, err := net.DestinationRules("").List(ctx, all)
			if err == nil {
				s.DestinationRules = l.Items
			}
			return err
		}},
		{"serviceentries", func() error {
			l, err := net.ServiceEntries("").List(ctx, all)
			if err == nil {
				s.ServiceEntries = l.Items
			}
			return err
		}},
		{"workloadentries", func() error {
			l, err := net.WorkloadEntries("").List(ctx, all)
			if err == nil {
				s.WorkloadEntries = l.Items
			}
			return err
		}},
		{"sidecars", func() error {
			l, err := net.Sidecars("").List(ctx, all)
			if err == nil {
				s.Sidecars = l.Items
			}
			return err
		}},
		{"gateways", func() error {
			l, err := net.Gateways("").List(ctx, all)
			if err == nil {
				s.Gateways = append([]*networking.Gateway{}, l.Items...) // known, even if none
			}
			for _, g := range s.Gateways {
				s.Unread = append(s.Unread, model.Key{Kind: analysis.KindGateway, Namespace: g.Namespace, Name: g.Name})
			}
			return err
		}},
		{"peerauthentications", func() error {
			l, err := sec.PeerAuthentications("").List(ctx, all)
			if err == nil {
				s.PeerAuthentications = l.Items
			}
			return err
		}},
		{"authorizationpolicies", func() error {
			l, err := sec.AuthorizationPolicies("").List(ctx, all)
			if err == nil {
				s.AuthorizationPolicies = l.Items
			}
			return err
		}},
		{"requestauthentications", func() error {
			l, err := sec.RequestAuthentications("").List(ctx, all)
			if err == nil {
				s.RequestAuthentications = l.Items
			}
			return err
		}},
	}
	for _, st := range steps {
		if err := st.run(); err != nil && !absent(err) {
			return nil, fmt.Errorf("list %s: %w", st.what, err)
		}
	}
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
