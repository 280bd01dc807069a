package main

import (
	"testing"

	"github.com/skiff-mesh/skiff/pkg/kuberest/kuberesttest"
)

// TestNoClientsets: install-cni runs on every node and reads pods and
// writes events through a REST client of core/v1 (kuberest.NewCore), not
// client-go's clientset, which registers every Kubernetes API group and
// keeps their generated code in the binary (30 MB with it, 20 MB without).
func TestNoClientsets(t *testing.T) { kuberesttest.NoClientsets(t) }
