package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// TestNoClientsets: install-cni runs on every node and reads pods and
// writes events through a REST client of core/v1 (kuberest.NewCore), not
// client-go's clientset, which registers every Kubernetes API group and
// keeps their generated code in the binary (30 MB with it, 20 MB without).
func TestNoClientsets(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "grpcnotrace", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if slices.Contains(kuberest.Clientsets, dep) {
			t.Errorf("install-cni links %s", dep)
		}
	}
}
