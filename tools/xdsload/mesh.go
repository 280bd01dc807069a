package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const benchNS = "bench"

func svcName(i int) string { return fmt.Sprintf("svc-%04d", i) }

func svcHost(i int) string { return svcName(i) + "." + benchNS + ".svc.cluster.local" }

func clusterName(i int) string { return "outbound|8080||" + svcHost(i) }

// writeMesh writes n services with m endpoints each: one file of Services,
// one EndpointSlice file per service (so an endpoint change rewrites one
// small file), VirtualServices splitting every tenth service 90/10, and
// DestinationRules with a load-balancer policy for every fifth. With pods,
// each endpoint's pod is written too and the endpoint names it.
func writeMesh(st store, n, m int, pods bool) error {
	if pods {
		if err := writePods(st, n, m); err != nil {
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
`, svcName(i), benchNS, i/250, i%250+1)
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
`, svcName(i), benchNS, svcName(i), svcName(i), svcName(i+1), svcName(i))
		}
		if i%5 == 0 {
			fmt.Fprintf(&drs, `---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: %s, namespace: %s}
spec:
  host: %s
  trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}
`, svcName(i), benchNS, svcHost(i))
		}
		if err := writeSlice(st, i, m, 0, pods); err != nil {
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
func writeSlice(st store, i, m, gen int, pods bool) error {
	return writeSliceWith(st, i, m, gen, pods, nil)
}

// endpointIP is service i's endpoint j of m in generation gen (mod 100).
func endpointIP(i, m, j, gen int) string {
	return fmt.Sprintf("10.%d.%d.%d", 128+gen%100, i%250, (i/250)*m+j+1)
}

// endpoint is one more endpoint of a slice: a pod's address and name.
type endpoint struct{ ip, pod string }

// writeSliceWith is writeSlice with extra endpoints after service i's own.
func writeSliceWith(st store, i, m, gen int, pods bool, extra []endpoint) error {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-1, namespace: %s, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
`, svcName(i), benchNS, svcName(i))
	for j := range m {
		fmt.Fprintf(&b, "- {addresses: [%q]", endpointIP(i, m, j, gen))
		if pods {
			fmt.Fprintf(&b, ", targetRef: {kind: Pod, namespace: %s, name: %s}", benchNS, podName(i, j))
		}
		b.WriteString("}\n")
	}
	for _, e := range extra {
		fmt.Fprintf(&b, "- {addresses: [%q], targetRef: {kind: Pod, namespace: %s, name: %s}}\n", e.ip, benchNS, e.pod)
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
// port: CDS, LDS (the TCP port's listener) and RDS change for every client.
func writeNewService(st store, k int) error {
	name := fmt.Sprintf("new-%d", k)
	return st.put(name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  clusterIP: 10.101.%d.%d
  ports: [{name: http, port: 8080}, {name: tcp-db, port: 5432}]
`, name, benchNS, k/250, k%250+1))
}
