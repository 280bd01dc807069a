package agent

import (
	"os"
	"path/filepath"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/agent/config"
)

// decodedNode is the agent's own node as Envoy's generated type reads it.
func decodedNode(t *testing.T, cfg *config.Config) *corev3.Node {
	t.Helper()
	var n corev3.Node
	if err := proto.Unmarshal(xdsNode(cfg), &n); err != nil {
		t.Fatalf("the agent's node does not decode: %v", err)
	}
	return &n
}

// TestNodeMetadataAsIstios: the metadata Istio's agent reports and its
// istiod and istioctl read (ISTIO_VERSION, ports, PILOT_SAN, PROXY_CONFIG,
// the pod's labels and annotations from the downward API files) is in the
// node of both streams.
func TestNodeMetadataAsIstios(t *testing.T) {
	dir := t.TempDir()
	pod := filepath.Join(dir, "etc/istio/pod")
	if err := os.MkdirAll(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"labels": "app=\"reviews\"\nversion=\"v1\"\npod-template-hash=\"x\"", "annotations": "team=\"a\""} {
		if err := os.WriteFile(filepath.Join(pod, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load([]string{"POD_NAMESPACE=demo", "POD_NAME=reviews-1", "WORKLOAD_IDENTITY_SOCKET_FILE=sds"}, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir = dir
	if err := cfg.ReadPodInfo(); err != nil {
		t.Fatal(err)
	}
	md := decodedNode(t, cfg).GetMetadata().GetFields()
	for k, want := range map[string]any{
		"ISTIO_VERSION": config.IstioVersion, "ENVOY_STATUS_PORT": 15021.0, "ENVOY_PROMETHEUS_PORT": 15090.0,
		"WORKLOAD_IDENTITY_SOCKET_FILE": "sds",
	} {
		if got := md[k].AsInterface(); got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if got := md["PILOT_SAN"].GetListValue().GetValues(); len(got) != 1 || got[0].GetStringValue() != "istiod.istio-system.svc" {
		t.Errorf("PILOT_SAN = %v", got)
	}
	if got := md["PROXY_CONFIG"].GetStructValue().GetFields()["discoveryAddress"].GetStringValue(); got != "istiod.istio-system.svc:15012" {
		t.Errorf("PROXY_CONFIG.discoveryAddress = %q", got)
	}
	labels := md["LABELS"].GetStructValue().AsMap()
	if labels["app"] != "reviews" || labels["version"] != "v1" || labels["pod-template-hash"] != nil {
		t.Errorf("LABELS = %v", labels)
	}
	if got := md["ANNOTATIONS"].GetStructValue().AsMap(); got["team"] != "a" {
		t.Errorf("ANNOTATIONS = %v", got)
	}
	if got := cfg.SDSSocketPath(); got != "var/run/secrets/workload-spiffe-uds/sds" {
		t.Errorf("SDS socket %q", got)
	}
	if _, err := config.Load([]string{"WORKLOAD_IDENTITY_SOCKET_FILE=../x"}, "sidecar"); err == nil {
		t.Error("WORKLOAD_IDENTITY_SOCKET_FILE=../x accepted")
	}
}
