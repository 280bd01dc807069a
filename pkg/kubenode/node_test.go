package kubenode

import (
	"os"
	"testing"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a node needs root (CI runs as root)")
	}
}

func TestNodeReady(t *testing.T) {
	requireRoot(t)
	n := Start(t, Options{})
	if n.Name == "" {
		t.Fatal("no node name")
	}
}
