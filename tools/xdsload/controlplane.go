package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"k8s.io/client-go/dynamic"

	"github.com/skiff-mesh/skiff/tools/internal/plane"
)

// The control planes xdsload runs (--control-plane).
const (
	planeSkiff = plane.Skiff // --istiod, on --source
	planeIstio = plane.Istio // Istio 1.31's own pilot-discovery (pkg/istiobin), on a Kubernetes API server
)

// The mesh's sources (--source).
const (
	sourceFiles = "files" // a directory Skiff's istiod watches (--config-dir)
	sourceKube  = "kube"  // a local kube-apiserver (pkg/kubetest), with Istio's CRDs
)

// controlPlane is the istiod under test, started on the benchmark's mesh.
type controlPlane struct {
	*plane.Process
	mesh    store
	closers []func()
}

func (cp *controlPlane) close() {
	for i := len(cp.closers) - 1; i >= 0; i-- {
		cp.closers[i]()
	}
}

// startControlPlane writes the mesh to its source, starts the control plane
// on it and waits until it is ready. close undoes all of it.
func startControlPlane(ctx context.Context, cfg config, log *slog.Logger) (_ *controlPlane, err error) {
	cp := &controlPlane{}
	defer func() {
		if err != nil {
			cp.close()
		}
	}()
	o := plane.Options{Plane: cfg.controlPlane, Istiod: cfg.istiod, LogLevel: cfg.logLevel, EDSDebounce: cfg.edsDebounce,
		PushConcurrency: cfg.pushConcurrency, Args: cfg.args, Env: cfg.env}
	switch cfg.source {
	case sourceFiles:
		dir, err := tempDir(cp, "xdsload-mesh-")
		if err != nil {
			return nil, err
		}
		cp.mesh, o.ConfigDir = fileStore{dir: dir}, dir
	case sourceKube:
		// The mesh's cluster IPs are in 10.100.0.0/16 and 10.101.0.0/16.
		env, err := plane.StartKube(ctx, "10.96.0.0/12", benchNS)
		if err != nil {
			return nil, err
		}
		cp.closers = append(cp.closers, env.Stop)
		dyn, err := dynamic.NewForConfig(env.Config)
		if err != nil {
			return nil, err
		}
		cp.mesh, o.Kubeconfig = kubeStore{ctx: ctx, dyn: dyn}, env.Kubeconfig
	default:
		return nil, fmt.Errorf("--source %q: want %s or %s", cfg.source, sourceFiles, sourceKube)
	}
	if err := writeMesh(cp.mesh, cfg.services, cfg.endpoints); err != nil {
		return nil, err
	}
	if cp.Process, err = plane.Start(ctx, o); err != nil {
		return nil, err
	}
	cp.closers = append(cp.closers, cp.Process.Stop)
	log.Info("control plane ready", "control-plane", cfg.controlPlane, "source", cfg.source, "pid", cp.Pid(),
		"services", cfg.services, "debug", cp.DebugAddr)
	return cp, nil
}

// tempDir makes a directory that cp's close removes.
func tempDir(cp *controlPlane, pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	cp.closers = append(cp.closers, func() { os.RemoveAll(dir) })
	return dir, nil
}
