// Package grpcsock serves gRPC on Unix sockets, as the agent serves SDS and
// xDS to the proxy. The socket is listened on before anything that dials it
// starts (the proxy), and served until a context ends.
package grpcsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
)

// Listen listens on a Unix socket at path, making its directory and
// replacing a socket a previous run left. A mode other than 0 is set on the
// socket before it is returned (before the listener accepts anyone).
func Listen(path string, mode os.FileMode) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if mode != 0 {
		if err := os.Chmod(path, mode); err != nil {
			ln.Close()
			return nil, fmt.Errorf("socket mode: %w", err)
		}
	}
	return ln, nil
}

// Serve serves g on ln until ctx ends.
func Serve(ctx context.Context, g *grpc.Server, ln net.Listener) error {
	stop := context.AfterFunc(ctx, g.Stop)
	defer stop()
	if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
