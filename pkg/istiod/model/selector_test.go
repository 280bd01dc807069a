package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeServicesSelectingMatchesScan: in random meshes, the services
// the index finds for random workloads are those a scan of every service
// finds: Kubernetes services of the workload's namespace whose selector
// the labels match, in the order of Services. ServiceEntries with a
// workload selector and services without a selector are never found.
func TestKubeServicesSelectingMatchesScan(t *testing.T) {
	keys, values, nss := []string{"app", "version", "tier", "team"}, []string{"a", "b", "c"}, []string{"x", "y"}
	randLabels := func(r *rand.Rand, n int) map[string]string {
		m := map[string]string{}
		for range n {
			m[keys[r.IntN(len(keys))]] = values[r.IntN(len(values))]
		}
		return m
	}
	for seed := range 200 {
		r := rand.New(rand.NewPCG(uint64(seed), 2))
		in := &Inputs{}
		for i := range 30 {
			in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: nss[r.IntN(len(nss))]},
				Spec: corev1.ServiceSpec{Selector: randLabels(r, r.IntN(3)), ClusterIP: fmt.Sprintf("10.0.0.%d", i+1), Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		}
		in.ServiceEntries = append(in.ServiceEntries, &networking.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "se", Namespace: "x"},
			Spec: apinet.ServiceEntry{Hosts: []string{"se.example.com"}, Ports: []*apinet.ServicePort{{Number: 80, Name: "http"}},
				WorkloadSelector: &apinet.WorkloadSelector{Labels: map[string]string{"app": "a"}}}})
		pc := BuildPushContext(in, "1")
		for range 20 {
			ns, labels := nss[r.IntN(len(nss))], randLabels(r, r.IntN(5))
			var want []*Service
			for _, svc := range pc.Services {
				if svc.Namespace == ns && svc.Registry == RegistryKubernetes && len(svc.Selector) > 0 && LabelsMatch(svc.Selector, labels) {
					want = append(want, svc)
				}
			}
			if got := pc.KubeServicesSelecting(ns, labels); !slices.Equal(got, want) {
				t.Errorf("seed %d: %s %v: got %v, want %v", seed, ns, labels, hostnames(got), hostnames(want))
			}
		}
	}
}

func hostnames(svcs []*Service) []string {
	var out []string
	for _, s := range svcs {
		out = append(out, s.Hostname)
	}
	return out
}
