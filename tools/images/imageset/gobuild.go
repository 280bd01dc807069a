package imageset

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// packages are the module's commands the images hold; each installs as the
// last element of its path.
var packages = []string{
	"./cmd/pilot-agent", "./cmd/istio-iptables", "./cmd/istiod", "./cmd/install-cni", "./cmd/cni-plugin", "./cmd/cni-lookup",
	"./examples/grpc-app", "./examples/capture-listener", "./tools/images/pause",
}

// installBinaries installs the packages into bin, static and reproducible
// (no cgo, no VCS stamp, trimmed paths), built as `make build` builds them,
// from the module of the working directory.
func installBinaries(ctx context.Context, bin string, log *slog.Logger) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	// The tags are the Makefile's GOTAGS: gRPC without x/net/trace.
	args := append([]string{"install", "-trimpath", "-buildvcs=false", "-tags=grpcnotrace", "-ldflags=-s -w"}, packages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOBIN="+bin, "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	log.Info("installing binaries", "dir", bin, "module", root)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), root, err, stderr.String())
	}
	return nil
}

// module is the module the packages are in.
const module = "github.com/skiff-mesh/skiff"

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module (go env GOMOD = %q)", mod)
	}
	b, err := os.ReadFile(mod)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == module {
			return filepath.Dir(mod), nil
		}
	}
	return "", fmt.Errorf("%s is not module %s: run from inside Skiff's tree", mod, module)
}
