package istiod

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube"
	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// TestPartsShareClients: with cfg.Clients set, istiod's parts use those
// clients (one rate limit for all of istiod, as Istio's one client) and
// read no kubeconfig; without, each reads it.
func TestPartsShareClients(t *testing.T) {
	shared, err := kuberest.New(&rest.Config{Host: "http://127.0.0.1:1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	cfg := DefaultConfig()
	cfg.Kubeconfig = filepath.Join(t.TempDir(), "missing")
	cfg.Clients = shared

	reg, err := newRegistry(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	if kr, ok := reg.(*kube.Registry); !ok || kr.Clients() != shared {
		t.Errorf("the registry has clients of its own: %T", reg)
	}
	if c, err := kubeClient(cfg); err != nil || c != shared {
		t.Errorf("the CA's clients: %p, %v; want the shared %p", c, err, shared)
	}
	lc, err := leader.ConfigFromEnv(func(string) (string, bool) { return "", false }, "istio-system")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewElector(cfg, lc, log); err != nil {
		t.Errorf("leader election: %v", err)
	}

	cfg.Clients = nil
	if _, err := kubeClient(cfg); err == nil {
		t.Error("without shared clients, the missing kubeconfig was not read")
	}
}
