package main

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
)

// nodeMetadata is the node metadata of client id as an Istio agent sends
// it for an injected pod (the fields of Istio's NodeMetadata that an agent
// fills from the pod, its environment and its proxy config), with the
// identity of the benchmark's certificate for namespace ns. istiod decodes it with each
// stream's first request and keeps what it parses of it. The client is a
// replica of app svc-(id mod apps): apps 0 means 1000, every sidecar its
// own app in the default mesh (the least sharing of inbound configuration).
func nodeMetadata(id, apps int, ns string) *structpb.Struct {
	if apps <= 0 {
		apps = 1000
	}
	name := fmt.Sprintf("client-%d", id)
	app := fmt.Sprintf("svc-%d", id%apps)
	m, err := structpb.NewStruct(map[string]any{
		"NAME": name, "NAMESPACE": ns, "SERVICE_ACCOUNT": "xdsload", "CLUSTER_ID": "Kubernetes",
		"MESH_ID": "cluster.local", "ISTIO_VERSION": "1.31.0", "INTERCEPTION_MODE": "REDIRECT",
		"WORKLOAD_NAME": app + "-v1", "OWNER": "kubernetes://apis/apps/v1/namespaces/" + ns + "/deployments/" + app + "-v1",
		"APP_CONTAINERS": app, "INSTANCE_IPS": fmt.Sprintf("10.250.%d.%d", id/250, id%250+1),
		"NODE_NAME": "node-1", "ENVOY_STATUS_PORT": 15021.0, "ENVOY_PROMETHEUS_PORT": 15090.0,
		"PILOT_SAN": []any{"istiod.istio-system.svc"}, "WORKLOAD_IDENTITY_SOCKET_FILE": "socket",
		"POD_PORTS": `[{"name":"http","containerPort":9080,"protocol":"TCP"}]`,
		"LABELS": map[string]any{
			"app": app, "version": "v1", "pod-template-hash": "5d8f7c9b6d",
			"security.istio.io/tlsMode": "istio", "service.istio.io/canonical-name": app,
			"service.istio.io/canonical-revision": "v1",
		},
		"ANNOTATIONS": map[string]any{
			"istio.io/rev": "default", "kubectl.kubernetes.io/default-container": app,
			"kubectl.kubernetes.io/default-logs-container": app, "prometheus.io/path": "/stats/prometheus",
			"prometheus.io/port": "15020", "prometheus.io/scrape": "true",
			"sidecar.istio.io/status": `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["workload-socket","credential-socket","workload-certs","istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}`,
		},
		"PROXY_CONFIG": map[string]any{
			"binaryPath": "/usr/local/bin/envoy", "configPath": "./etc/istio/proxy", "controlPlaneAuthPolicy": "MUTUAL_TLS",
			"discoveryAddress": "istiod.istio-system.svc:15012", "drainDuration": "45s", "proxyAdminPort": 15000.0,
			"serviceCluster": "istio-proxy", "statNameLength": 189.0, "statusPort": 15020.0,
			"terminationDrainDuration": "5s", "tracing": map[string]any{"zipkin": map[string]any{"address": "zipkin.istio-system:9411"}},
		},
	})
	if err != nil {
		panic(err) // the literal above is a valid Struct
	}
	return m
}
