package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// benchNS is the namespace of the generated services.
const benchNS = "bench"

func svcHost(i int) string { return fmt.Sprintf("svc-%04d.%s.svc.cluster.local", i, benchNS) }

// writeServices writes n Services, each with a cluster IP and one
// EndpointSlice of two ready endpoints, into dir/agentbench-services.yaml,
// in the format of examples/mesh, so every one is in the agent's NameTable.
func writeServices(dir string, n int) error {
	if n > 250*250 {
		return fmt.Errorf("-services %d: at most %d", n, 250*250)
	}
	var b strings.Builder
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  clusterIP: 10.100.%d.%d
  selector: {app: %s}
  ports: [{name: http, port: 8080, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-x1, namespace: %s, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.101.%d.%d"]
  conditions: {ready: true}
- addresses: ["10.102.%d.%d"]
  conditions: {ready: true}
`, name, benchNS, i/250, i%250+1, name, name, benchNS, name, i/250, i%250+1, i/250, i%250+1)
	}
	path := filepath.Join(dir, "agentbench-services.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
