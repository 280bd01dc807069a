package main

import (
	"testing"

	"github.com/skiff-mesh/skiff/pkg/kuberest/kuberesttest"
)

// TestNoClientsets: istioctl reads pods, tokens and Istio's configuration
// through REST clients of the groups it reads (pkg/kuberest), not
// client-go's or Istio's clientsets, which register every Kubernetes API
// group and keep their generated code in the binary (34 MB with them,
// 22.5 MB without).
func TestNoClientsets(t *testing.T) { kuberesttest.NoClientsets(t) }
