package grpcsock_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/skiff-mesh/skiff/pkg/grpcsock"
)

// TestListenServeStop: the socket gets its directory and mode, replaces a
// stale one, and answers an RPC.
func TestListenServeStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "SOCK")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil { // a previous run's
		t.Fatal(err)
	}
	ln, err := grpcsock.Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %v, err %v; want a socket of mode 0600", fi.Mode(), err)
	}
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()

	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("RPC on the socket: %v", err)
	}
	g.Stop()
	if err := <-served; err != nil {
		t.Errorf("Serve after Stop: %v", err)
	}
}

func TestListenBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := grpcsock.Listen(filepath.Join(file, "SOCK"), 0); err == nil {
		t.Error("Listen under a regular file: no error")
	}
}
