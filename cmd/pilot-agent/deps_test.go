package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoReflectMethodDeps: pilot-agent links no text/template. text/template
// calls methods by name through reflect, and once that is linked the Go
// linker keeps every exported method of every linked type.
func TestNoReflectMethodDeps(t *testing.T) {
	for _, dep := range deps(t) {
		switch dep {
		case "text/template", "html/template", "golang.org/x/net/trace":
			t.Errorf("pilot-agent links %s", dep)
		}
	}
}

// TestLean: the agent speaks gRPC, xDS, SDS and the CA's protocol with
// code of its own (pkg/grpcwire on net/http's HTTP/2, hand-written
// protobuf in pkg/xdswire and pkg/nds), so it links none of grpc-go, the
// generated Envoy and Istio types, the protobuf runtime or the Prometheus
// client: together they were most of its 15 MB of resident binary pages.
// Only protowire, a few hundred lines that link no registry, is allowed.
func TestLean(t *testing.T) {
	for _, dep := range deps(t) {
		for _, banned := range []string{"google.golang.org/grpc", "google.golang.org/protobuf/", "google.golang.org/genproto",
			"github.com/envoyproxy/", "istio.io/", "github.com/prometheus/", "github.com/golang/protobuf", "github.com/cncf/"} {
			if strings.HasPrefix(dep, banned) && !protowire(dep) {
				t.Errorf("pilot-agent links %s", dep)
			}
		}
	}
}

// protowire reports whether dep is protowire or a package it needs.
func protowire(dep string) bool {
	switch dep {
	case "google.golang.org/protobuf/encoding/protowire", "google.golang.org/protobuf/internal/errors",
		"google.golang.org/protobuf/internal/detrand":
		return true
	}
	return false
}

func deps(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}
