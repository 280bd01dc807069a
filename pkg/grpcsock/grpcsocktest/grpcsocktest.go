// Package grpcsocktest listens on Unix sockets for tests.
package grpcsocktest

import (
	"net"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/grpcsock"
)

// Listen is grpcsock.Listen (mode 0600), failing t on error and closing
// the listener when t ends.
func Listen(t testing.TB, path string) net.Listener {
	t.Helper()
	ln, err := grpcsock.Listen(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
