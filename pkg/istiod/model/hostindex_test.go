package model

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScopeRulesMatchScan: in random meshes, the VirtualService and the
// DestinationRule a scope finds for each service through the host indexes
// are those a scan of every object in age order finds, as Istio's rules
// read: short names resolved in the object's namespace, "*" and "*.suffix"
// patterns, exportTo, and a rule in the proxy's namespace before one in the
// service's before any other.
func TestScopeRulesMatchScan(t *testing.T) {
	nss := []string{"a", "b", "c"}
	hosts := []string{"s0", "s1", "s2", "s1.b", "s0.a.svc.cluster.local", "s2.c.svc.cluster.local", "*", "*.example.com",
		"api.example.com", "db.example.org", "*.svc.cluster.local", "*.b.svc.cluster.local", "*.org", "nothing.example.net"}
	exports := [][]string{nil, {"."}, {"*"}, {"a"}, {".", "c"}, {"b"}}
	base := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		meta := func(kind string, i int) metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", kind, i), Namespace: nss[r.IntN(len(nss))],
				CreationTimestamp: metav1.NewTime(base.Add(time.Duration(r.IntN(5)) * time.Second))}
		}
		in := &Inputs{}
		for _, ns := range nss {
			for i := range 3 {
				in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: ns},
					Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.0.%d.%d", len(ns), i+1), Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
			}
		}
		in.ServiceEntries = append(in.ServiceEntries, &networking.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "a"},
			Spec: apinet.ServiceEntry{Hosts: []string{"api.example.com", "db.example.org", "web.example.com"},
				Ports: []*apinet.ServicePort{{Number: 443, Name: "tls", Protocol: "TLS"}}, Resolution: apinet.ServiceEntry_DNS}})
		for i := range r.IntN(8) {
			vs := &networking.VirtualService{ObjectMeta: meta("vs", i)}
			for range 1 + r.IntN(3) {
				vs.Spec.Hosts = append(vs.Spec.Hosts, hosts[r.IntN(len(hosts))])
			}
			vs.Spec.ExportTo = exports[r.IntN(len(exports))]
			in.VirtualServices = append(in.VirtualServices, vs)
		}
		for i := range r.IntN(8) {
			dr := &networking.DestinationRule{ObjectMeta: meta("dr", i)}
			dr.Spec.Host = hosts[r.IntN(len(hosts))]
			dr.Spec.ExportTo = exports[r.IntN(len(exports))]
			in.DestinationRules = append(in.DestinationRules, dr)
		}
		pc := BuildPushContext(in, "1")
		for _, ns := range nss {
			sc := pc.ScopeFor(&Proxy{Namespace: ns})
			for _, svc := range sc.Services {
				if got, want := sc.VirtualService[svc.Hostname], scanVirtualService(pc, ns, svc); got != want {
					t.Errorf("seed %d: %s from %s: VirtualService %s, want %s", seed, svc.Hostname, ns, objName(got), objName(want))
				}
				if got, want := sc.DestinationRule[svc.Hostname], scanDestinationRule(pc, ns, svc); got != want {
					t.Errorf("seed %d: %s from %s: DestinationRule %s, want %s", seed, svc.Hostname, ns, objName(got), objName(want))
				}
			}
		}
	}
}

func objName[T interface{ GetName() string }](o T) string {
	if any(o) == any((*networking.VirtualService)(nil)) || any(o) == any((*networking.DestinationRule)(nil)) {
		return "none"
	}
	return o.GetName()
}

// scanVirtualService is the first VirtualService, oldest first, exported
// to ns with a host that matches svc, found by trying each.
func scanVirtualService(pc *PushContext, ns string, svc *Service) *networking.VirtualService {
	for _, vs := range pc.VirtualServices {
		if !exportedTo(vs.Spec.GetExportTo(), vs.Namespace, ns) {
			continue
		}
		for _, h := range vs.Spec.GetHosts() {
			if HostMatches(ResolveHostIn(h, vs.Namespace, pc.Domain), svc.Hostname) {
				return vs
			}
		}
	}
	return nil
}

// scanDestinationRule tries every DestinationRule exported to ns that
// matches svc, and keeps the oldest of the best rank (ruleRank, whose
// order TestRuleRank states).
func scanDestinationRule(pc *PushContext, ns string, svc *Service) *networking.DestinationRule {
	var best *networking.DestinationRule
	rank := 4
	for _, dr := range pc.DestinationRules {
		if !exportedTo(dr.Spec.GetExportTo(), dr.Namespace, ns) || !HostMatches(ResolveHostIn(dr.Spec.GetHost(), dr.Namespace, pc.Domain), svc.Hostname) {
			continue
		}
		if r := ruleRank(dr.Namespace, ns, svc.Namespace, MeshRootNamespace(pc.Mesh), privateRule(dr)); r > 0 && r < rank {
			best, rank = dr, r
		}
	}
	return best
}

// TestRuleRank: a rule in the proxy's namespace ranks first, then one in
// the service's, then one in the root namespace; one elsewhere never
// applies. A proxy in the root namespace ranks the root's private rules
// first and its exported ones last. Istio's pilot-discovery picks the
// same (test/interop TestDestinationRulePickAsIstio).
func TestRuleRank(t *testing.T) {
	for _, tc := range []struct {
		rule, proxy, svc string
		private          bool
		want             int
	}{
		{rule: "a", proxy: "a", svc: "b", want: 1},
		{rule: "a", proxy: "a", svc: "a", want: 1},
		{rule: "b", proxy: "a", svc: "b", want: 2},
		{rule: "istio-system", proxy: "a", svc: "b", want: 3},
		{rule: "c", proxy: "a", svc: "b", want: 0},
		{rule: "istio-system", proxy: "istio-system", svc: "b", private: true, want: 1},
		{rule: "istio-system", proxy: "istio-system", svc: "b", want: 3},
		{rule: "b", proxy: "istio-system", svc: "b", want: 2},
	} {
		if got := ruleRank(tc.rule, tc.proxy, tc.svc, "istio-system", tc.private); got != tc.want {
			t.Errorf("rule in %s (private %t), proxy in %s, service in %s: rank %d, want %d", tc.rule, tc.private, tc.proxy, tc.svc, got, tc.want)
		}
	}
}
