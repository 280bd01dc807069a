// Package kuberesttest checks that a binary on pkg/kuberest's REST clients
// keeps client-go's and Istio's clientsets out.
package kuberesttest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// clientsets are the packages of client-go and Istio that register every
// Kubernetes API group (clientsets, informer factories, the discovery
// client, leader election's locks), keeping their generated code in the
// binary.
var clientsets = []string{
	"k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/scheme", "k8s.io/client-go/informers",
	"k8s.io/client-go/discovery", "k8s.io/client-go/tools/leaderelection",
	"istio.io/client-go/pkg/clientset/versioned", "istio.io/client-go/pkg/informers/externalversions",
}

// NoClientsets fails t for each clientset package the main package in the
// current directory links, built as make build builds it.
func NoClientsets(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", "grpcnotrace", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if slices.Contains(clientsets, dep) {
			t.Errorf("links %s", dep)
		}
	}
}
