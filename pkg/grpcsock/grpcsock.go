// Package grpcsock listens on the Unix sockets the agent serves gRPC on
// (SDS and xDS to the proxy). The socket is listened on before anything
// that dials it starts (the proxy).
package grpcsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
