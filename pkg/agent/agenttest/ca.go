// Package agenttest runs the real istiod CA in-process for the agent's
// tests: gRPC on loopback, callers identified by a bearer token.
package agenttest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// Token is the bearer token the test CA accepts.
const Token = "agent-test-token"

// tokenAuth accepts Token as the identity of one service account.
type tokenAuth struct{ id spiffe.ID }

func (a tokenAuth) Name() string { return "test-token" }

func (a tokenAuth) Authenticate(ctx context.Context) (spiffe.ID, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if strings.TrimPrefix(v, "Bearer ") == Token {
			return a.id, nil
		}
		return spiffe.ID{}, fmt.Errorf("unknown token")
	}
	return spiffe.ID{}, fmt.Errorf("%w: no bearer token", ca.ErrNoCredential)
}

// CA is a running test CA.
type CA struct {
	*ca.CA
	// Addr is its plaintext gRPC address.
	Addr string
	// Identity is what Token proves.
	Identity spiffe.ID
}

// NewCA makes a file-mode CA (self-signed root in a temp dir) that signs
// for namespace/sa when called with Token; register it on a gRPC server.
func NewCA(t testing.TB, namespace, sa string) *CA {
	t.Helper()
	id, err := spiffe.New("cluster.local", namespace, sa)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := ca.New(ctx, ca.Config{SelfSignedDir: t.TempDir(), Authenticators: []ca.Authenticator{tokenAuth{id}}, ServingDNSNames: []string{"localhost"}},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return &CA{CA: c, Identity: id}
}

// StartCA runs NewCA's CA on its own gRPC server on loopback until the test ends.
func StartCA(t testing.TB, namespace, sa string) *CA {
	t.Helper()
	c := NewCA(t, namespace, sa)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	c.Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	c.Addr = ln.Addr().String()
	return c
}
