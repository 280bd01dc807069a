package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
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
	var env *kubetest.Env
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
		if env, err = plane.StartKube(ctx, "10.96.0.0/12", cfg.spread.namespaces()...); err != nil {
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
	if err := writeMesh(cp.mesh, cfg.spread, cfg.services, cfg.endpoints, cfg.pods); err != nil {
		return nil, err
	}
	if cp.Process, err = plane.Start(ctx, o); err != nil {
		return nil, err
	}
	cp.closers = append(cp.closers, cp.Process.Stop)
	if env != nil && cfg.tls {
		// The root and key the control plane keeps in the API server,
		// where the TLS clients look for them in file mode.
		if err := saveCA(ctx, env, filepath.Join(cp.Work, "var/lib/istio/ca")); err != nil {
			return nil, err
		}
	}
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

// saveCA waits for the istio-ca-secret Secret the control plane makes in
// istio-system (Skiff's and Istio's alike) and writes its root certificate
// and key into dir under the file-mode names.
func saveCA(ctx context.Context, env *kubetest.Env, dir string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		sec, err := env.Client.CoreV1().Secrets("istio-system").Get(ctx, "istio-ca-secret", metav1.GetOptions{})
		if err == nil && len(sec.Data["ca-cert.pem"]) > 0 && len(sec.Data["ca-key.pem"]) > 0 {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			for name, data := range map[string][]byte{ca.CACertFile: sec.Data["ca-cert.pem"], ca.CAKeyFile: sec.Data["ca-key.pem"]} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					return err
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no istio-ca-secret in istio-system after a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
