package kube_test

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject/injecttest"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func ptr[T any](v T) *T { return &v }

func TestKubeRegistry(t *testing.T) {
	env, ctx := crdtest.Start(t)
	ic, err := istioclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kc := env.Client

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "reviews"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 9080, TargetPort: intstr.FromInt32(9080)}}},
	}
	if _, err := kc.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inj, err := injecttest.Injector()
	if err != nil {
		t.Fatal(err)
	}
	pod, err := injecttest.Pod(inj, injecttest.Spec{Name: "reviews-0", Namespace: "default", App: "reviews",
		ServiceAccount: "bookinfo-reviews", IP: "10.1.0.1", HostIP: "192.168.0.2", Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	status := pod.Status
	created, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = status
	if _, err := kc.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "reviews-1", Namespace: "default", Labels: map[string]string{"kubernetes.io/service-name": "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("grpc"), Port: ptr(int32(9080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}
	if _, err := kc.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dr := &networking.DestinationRule{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "default"},
		Spec: apinet.DestinationRule{Host: "reviews", Subsets: []*apinet.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}}}},
	}
	if _, err := ic.NetworkingV1().DestinationRules("default").Create(ctx, dr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Accepted by the schema-less CRD, rejected by istiod: no destination
	// has a weight.
	bad := &networking.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"},
		Spec: apinet.VirtualService{Hosts: []string{"reviews"}, Http: []*apinet.HTTPRoute{{Route: []*apinet.HTTPRouteDestination{
			{Destination: &apinet.Destination{Host: "reviews", Subset: "v1"}},
			{Destination: &apinet.Destination{Host: "reviews", Subset: "v2"}},
		}}}},
	}
	if _, err := ic.NetworkingV1().VirtualServices("default").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var logs logtest.Buffer
	r, err := kube.New(kube.Config{Rest: env.Config}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan struct{}, 100)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx, func() { changes <- struct{}{} }) }()
	defer func() { cancel(); <-done }()

	polltest.Until(t, "sync", func() bool { return r.Synced() })
	in := r.Inputs()
	if len(in.Services) < 1 || len(in.EndpointSlices) != 1 || len(in.DestinationRules) != 1 || len(in.VirtualServices) != 0 {
		t.Fatalf("inputs: %d services, %d slices, %d rules, %d virtual services", len(in.Services), len(in.EndpointSlices), len(in.DestinationRules), len(in.VirtualServices))
	}
	if p := r.Problems(); len(p) != 1 || !strings.Contains(p[0].Error(), "VirtualService default/bad") || !strings.Contains(p[0].Error(), "no destination has a weight") {
		t.Fatalf("problems: %v", p)
	}
	// Left out, and said so once, with the object and why.
	r.Inputs()
	if n := strings.Count(logs.String(), "invalid object left out"); n != 1 || !strings.Contains(logs.String(), "VirtualService default/bad") {
		t.Fatalf("the invalid VirtualService logged %d times; log:\n%s", n, logs.String())
	}
	pc := model.BuildPushContext(in, "1")
	if eps := pc.Endpoints["reviews.default.svc.cluster.local"]; len(eps) != 1 || eps[0].Address != "10.1.0.1" ||
		eps[0].ServiceAccount != "bookinfo-reviews" || eps[0].Labels["app"] != "reviews" {
		t.Fatalf("reviews endpoints: %+v", eps)
	}
	// The caches keep no managedFields, and of pods only what istiod reads.
	if len(in.Pods) != 1 || !slices.Equal(in.Pods[0].IPs, []string{"10.1.0.1"}) || in.Pods[0].ServiceAccount != "bookinfo-reviews" {
		t.Fatalf("cached pods: %+v (want 1 with its IP and service account)", in.Pods)
	}
	if in.Services[0].ManagedFields != nil || in.EndpointSlices[0].ManagedFields != nil || in.DestinationRules[0].ManagedFields != nil {
		t.Fatal("cached objects keep their managedFields")
	}

	// An endpoint change arrives through the informer.
	drain(changes)
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.0.2"}})
	if _, err := kc.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no change notification for an EndpointSlice update")
	}
	polltest.Until(t, "endpoint update", func() bool {
		pc2 := model.BuildPushContext(r.Inputs(), "2")
		c := pc2.Diff(pc)
		_, ok := c.Hosts["reviews.default.svc.cluster.local"]
		return !c.Full && ok
	})

	// Fixing the VirtualService makes it count.
	fixed, err := ic.NetworkingV1().VirtualServices("default").Get(ctx, "bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixed.Spec.Http[0].Route[1].Weight = 40
	if _, err := ic.NetworkingV1().VirtualServices("default").Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "fixed VirtualService", func() bool { return len(r.Inputs().VirtualServices) == 1 && len(r.Problems()) == 0 })

	// Pods come, change and go through the informer, each patched into
	// the sorted list, and a push context rebuilt from its predecessor
	// reads them.
	prev := model.BuildPushContext(r.Inputs(), "3")
	second, err := injecttest.Pod(inj, injecttest.Spec{Name: "reviews-1", Namespace: "default", App: "reviews",
		ServiceAccount: "bookinfo-reviews-1", IP: "10.1.0.2", HostIP: "192.168.0.2", Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	status = second.Status
	if second, err = kc.CoreV1().Pods("default").Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	second.Status = status
	if _, err := kc.CoreV1().Pods("default").UpdateStatus(ctx, second, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the second pod", func() bool {
		pods := r.Inputs().Pods
		return len(pods) == 2 && pods[0].Name == "reviews-0" && pods[1].Name == "reviews-1" && slices.Equal(pods[1].IPs, []string{"10.1.0.2"})
	})
	pc = model.Rebuild(prev, r.Inputs(), "4")
	if eps := pc.Endpoints["reviews.default.svc.cluster.local"]; len(eps) != 2 || eps[1].ServiceAccount != "bookinfo-reviews-1" {
		t.Fatalf("reviews endpoints after the second pod: %+v", eps)
	}
	first, err := kc.CoreV1().Pods("default").Get(ctx, "reviews-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first.Labels["version"] = "v2"
	if _, err := kc.CoreV1().Pods("default").Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the first pod relabelled", func() bool {
		pods := r.Inputs().Pods
		return len(pods) == 2 && pods[0].Labels["version"] == "v2"
	})
	prev, pc = pc, model.Rebuild(pc, r.Inputs(), "5")
	if c := pc.Diff(prev); c.Full || !maps.Equal(c.Proxies, map[string]struct{}{"10.1.0.1": {}}) {
		t.Fatalf("change after a relabelled pod: %+v", c)
	}
	if err := kc.CoreV1().Pods("default").Delete(ctx, "reviews-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, "the first pod gone", func() bool {
		pods := r.Inputs().Pods
		return len(pods) == 1 && pods[0].Name == "reviews-1"
	})
	prev, pc = pc, model.Rebuild(pc, r.Inputs(), "6")
	if eps := pc.Endpoints["reviews.default.svc.cluster.local"]; len(eps) != 2 || eps[0].ServiceAccount != "" || eps[1].ServiceAccount != "bookinfo-reviews-1" {
		t.Fatalf("reviews endpoints after the first pod went: %+v", eps)
	}
}

func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
