package model_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// TestPodChanges: what istiod takes from pods is in the endpoints and in
// the labels of proxies that send none, so a pod change is an endpoint
// change of its services and a change for the proxy at its address, not
// a full push; except when it changes a cluster's service accounts (its
// SANs), which Istio also pushes in full.
func TestPodChanges(t *testing.T) {
	const host = "a.shop.svc.cluster.local"
	pod := func(ip, sa string, labels map[string]string) *model.Pod {
		return &model.Pod{Name: "p-" + ip, Namespace: "shop", Labels: labels, ServiceAccount: sa, IPs: []string{ip}}
	}
	base := &model.Inputs{
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "shop"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Name: "a-1", Namespace: "shop", Labels: map[string]string{"kubernetes.io/service-name": "a"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(80))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
		}},
		Pods: []*model.Pod{pod("10.1.0.1", "a", map[string]string{"app": "a", "version": "v1"})},
	}
	for _, c := range []struct {
		name        string
		pods        []*model.Pod
		full        bool
		hosts, ips  []string
		wantVersion string
	}{
		{name: "same values, new object", pods: []*model.Pod{pod("10.1.0.1", "a", map[string]string{"app": "a", "version": "v1"})},
			wantVersion: "v1"},
		{name: "an endpoint's labels", pods: []*model.Pod{pod("10.1.0.1", "a", map[string]string{"app": "a", "version": "v2"})},
			hosts: []string{host}, ips: []string{"10.1.0.1"}, wantVersion: "v2"},
		{name: "a pod that is no endpoint", pods: append(base.Pods[:1:1], pod("10.1.0.7", "b", map[string]string{"app": "b"})),
			ips: []string{"10.1.0.7"}, wantVersion: "v1"},
		{name: "an endpoint's service account", pods: []*model.Pod{pod("10.1.0.1", "other", map[string]string{"app": "a", "version": "v1"})},
			full: true, wantVersion: "v1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			prev := model.BuildPushContext(base, "1")
			in := *base
			in.Pods = c.pods
			pc := model.Rebuild(prev, &in, "2")
			ch := pc.Diff(prev)
			if ch.Full != c.full {
				t.Fatalf("full: %v, want %v", ch.Full, c.full)
			}
			if !c.full && (!sameKeys(ch.Hosts, c.hosts) || !sameKeys(ch.Proxies, c.ips)) {
				t.Errorf("change: hosts %v proxies %v, want %v and %v", ch.Hosts, ch.Proxies, c.hosts, c.ips)
			}
			if eps := pc.Endpoints[host]; len(eps) != 1 || eps[0].Labels["version"] != c.wantVersion {
				t.Errorf("endpoints after the change: %+v", eps)
			}
			if pc.ConfigHash != prev.ConfigHash {
				t.Error("pods changed the configuration hash")
			}
		})
	}
}

func sameKeys(m map[string]struct{}, want []string) bool {
	if len(m) != len(want) {
		return false
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}
