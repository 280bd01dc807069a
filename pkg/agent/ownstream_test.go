package agent

import (
	"testing"

	"github.com/skiff-mesh/skiff/pkg/agent/config"
)

// TestOwnStreamHasNoGenerator: with Istio's grpc-agent template the pod's
// metadata says GENERATOR=grpc; the agent's own stream must not, or istiod
// answers its all-clusters request with the proxyless generator's error.
func TestOwnStreamHasNoGenerator(t *testing.T) {
	cfg, err := config.Load([]string{"ISTIO_META_GENERATOR=grpc", "POD_NAMESPACE=default", "POD_NAME=app-1"}, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	if got := bootstrapNode(cfg).Metadata["GENERATOR"]; got != "grpc" {
		t.Errorf("app bootstrap GENERATOR = %v, want grpc", got)
	}
	md := decodedNode(t, cfg).GetMetadata().GetFields()
	if _, ok := md["GENERATOR"]; ok {
		t.Errorf("the agent's own stream carries GENERATOR=%v", md["GENERATOR"])
	}
	if md["NAMESPACE"].GetStringValue() != "default" {
		t.Errorf("own stream metadata lost the rest: %v", md)
	}
}
