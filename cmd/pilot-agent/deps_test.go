package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoReflectMethodDeps: built with -tags grpcnotrace (as it should
// ship), pilot-agent links no text/template. text/template calls methods
// by name through reflect, and once that is linked the Go linker keeps
// every exported method of every linked type (for the Envoy and Istio
// protos, their Validate code and getters): 22.1 MB stripped against 17.1.
// gRPC links it through golang.org/x/net/trace unless grpcnotrace is set.
func TestNoReflectMethodDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "grpcnotrace", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "text/template", "html/template", "golang.org/x/net/trace":
			t.Errorf("pilot-agent links %s", dep)
		}
	}
}
