package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const benchNS = "bench"

func svcName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// spread is how many namespaces the mesh's services and sidecars are
// spread over (--namespaces): service i, its pods and sidecar i live in
// namespace i mod spread. One namespace is "bench", as before the flag.
type spread int

// ns is the namespace of service (or sidecar) i.
func (s spread) ns(i int) string {
	if s <= 1 {
		return benchNS
	}
	return fmt.Sprintf("%s-%02d", benchNS, i%int(s))
}

// namespaces are all of the mesh's namespaces.
func (s spread) namespaces() []string {
	out := make([]string, max(int(s), 1))
	for i := range out {
		out[i] = s.ns(i)
	}
	return out
}

func (s spread) host(i int) string { return svcName(i) + "." + s.ns(i) + ".svc.cluster.local" }

func (s spread) cluster(i int) string { return "outbound|8080||" + s.host(i) }

// ref is how a resource in service i's namespace names service j: by its
// short name in the same namespace, else by its full host.
func (s spread) ref(i, j int) string {
	if s.ns(i) == s.ns(j) {
		return svcName(j)
	}
	return s.host(j)
}

// writeMesh writes n services with m endpoints each: one file of Services,
// one EndpointSlice file per service (so an endpoint change rewrites one
// small file), VirtualServices splitting every tenth service 90/10, and
// DestinationRules with a load-balancer policy for every fifth, each in
// its service's namespace. With pods, each endpoint's pod is written too
// and the endpoint names it.
func writeMesh(st store, sp spread, n, m int, pods bool) error {
	if pods {
		if err := writePods(st, sp, n, m); err != nil {
			return fmt.Errorf("write pods: %w", err)
		}
	}
	var svcs, vss, drs strings.Builder
	for i := range n {
		fmt.Fprintf(&svcs, `---
apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  clusterIP: 10.100.%d.%d
  ports: [{name: http, port: 8080, targetPort: 8080}]
`, svcName(i), sp.ns(i), i/250, i%250+1)
		if i%10 == 0 && i+1 < n {
			fmt.Fprintf(&vss, `---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: %s, namespace: %s}
spec:
  hosts: [%s]
  http:
  - match: [{uri: {prefix: /api}}]
    route:
    - {destination: {host: %s}, weight: 90}
    - {destination: {host: %s}, weight: 10}
    timeout: 3s
  - route: [{destination: {host: %s}}]
`, svcName(i), sp.ns(i), svcName(i), svcName(i), sp.ref(i, i+1), svcName(i))
		}
		if i%5 == 0 {
			fmt.Fprintf(&drs, `---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %s, namespace: %s}
spec:
  host: %s
  trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}
`, svcName(i), sp.ns(i), sp.host(i))
		}
		if err := writeSlice(st, sp, i, m, 0, pods); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		b    *strings.Builder
	}{{"services.yaml", &svcs}, {"virtualservices.yaml", &vss}, {"destinationrules.yaml", &drs}} {
		if err := st.put(f.name, f.b.String()); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}

// writeSlice (re)writes service i's EndpointSlice; a different gen (mod
// 100) gives different addresses, so each rewrite is a real change. With
// pods, each endpoint names its pod, as the EndpointSlice controller writes.
func writeSlice(st store, sp spread, i, m, gen int, pods bool) error {
	return writeSliceWith(st, sp, i, m, gen, pods, nil)
}

// endpointIP is service i's endpoint j of m in generation gen (mod 100).
func endpointIP(i, m, j, gen int) string {
	return fmt.Sprintf("10.%d.%d.%d", 128+gen%100, i%250, (i/250)*m+j+1)
}

// endpoint is one more endpoint of a slice: a pod's address and name.
type endpoint struct{ ip, pod string }

// writeSliceWith is writeSlice with extra endpoints after service i's own.
func writeSliceWith(st store, sp spread, i, m, gen int, pods bool, extra []endpoint) error {
	ns := sp.ns(i)
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-1, namespace: %s, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
`, svcName(i), ns, svcName(i))
	for j := range m {
		fmt.Fprintf(&b, "- {addresses: [%q]", endpointIP(i, m, j, gen))
		if pods {
			fmt.Fprintf(&b, ", targetRef: {kind: Pod, namespace: %s, name: %s}", ns, podName(i, j))
		}
		b.WriteString("}\n")
	}
	for _, e := range extra {
		fmt.Fprintf(&b, "- {addresses: [%q], targetRef: {kind: Pod, namespace: %s, name: %s}}\n", e.ip, ns, e.pod)
	}
	return st.put(filepath.Join("slices", svcName(i)+".yaml"), b.String())
}

// replaceFile writes aside and renames, as editors and kubectl-like tools do.
func replaceFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeNewService adds a service without endpoints, with an HTTP and a TCP
// port, in namespace k mod spread: CDS, LDS (the TCP port's listener) and
// RDS change for every client.
func writeNewService(st store, sp spread, k int) error {
	name := fmt.Sprintf("new-%d", k)
	return st.put(name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  clusterIP: 10.101.%d.%d
  ports: [{name: http, port: 8080}, {name: tcp-db, port: 5432}]
`, name, sp.ns(k), k/250, k%250+1))
}
