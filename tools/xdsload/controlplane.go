package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// The control planes xdsload runs (--control-plane).
const (
	planeSkiff = "skiff" // --istiod, on --source
	planeIstio = "istio" // Istio 1.31's own pilot-discovery (pkg/istiobin), on a Kubernetes API server
)

// The mesh's sources (--source).
const (
	sourceFiles = "files" // a directory Skiff's istiod watches (--config-dir)
	sourceKube  = "kube"  // a local kube-apiserver (pkg/kubetest), with Istio's CRDs
)

// controlPlane is the istiod under test, started on the benchmark's mesh.
type controlPlane struct {
	pid                             int
	grpcAddr, secureAddr, debugAddr string
	work                            string // its working directory (Skiff's CA files land here)
	mesh                            store
	closers                         []func()
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
	var monAddr string
	for _, a := range []*string{&cp.grpcAddr, &cp.secureAddr, &cp.debugAddr, &monAddr} {
		if *a, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	if cp.work, err = os.MkdirTemp("", "xdsload-istiod-"); err != nil {
		return nil, err
	}
	cp.closers = append(cp.closers, func() { os.RemoveAll(cp.work) })

	var kubeconfig string
	switch cfg.source {
	case sourceFiles:
		dir := filepath.Join(cp.work, "mesh")
		cp.mesh = fileStore{dir: dir}
	case sourceKube:
		env, st, err := startKube(ctx)
		if err != nil {
			return nil, err
		}
		cp.closers = append(cp.closers, env.Stop)
		cp.mesh, kubeconfig = st, env.Kubeconfig
	default:
		return nil, fmt.Errorf("--source %q: want %s or %s", cfg.source, sourceFiles, sourceKube)
	}
	if err := writeMesh(cp.mesh, cfg.services, cfg.endpoints); err != nil {
		return nil, err
	}

	var cmd *exec.Cmd
	ready := "http://" + monAddr + "/ready"
	switch cfg.controlPlane {
	case planeSkiff:
		bin, err := filepath.Abs(cfg.istiod)
		if err != nil {
			return nil, err
		}
		args := []string{"--grpcAddr", cp.grpcAddr, "--monitoringAddr", monAddr,
			"--secureGRPCAddr", cp.secureAddr, "--webhookAddr", "",
			"--httpAddr", cp.debugAddr, "--log-level", cfg.logLevel, "--eds-debounce=" + strconv.FormatBool(cfg.edsDebounce),
			"--push-concurrency", strconv.Itoa(cfg.pushConcurrency)}
		if kubeconfig != "" {
			args = append(args, "--kubeconfig", kubeconfig)
		} else {
			args = append(args, "--config-dir", cp.mesh.(fileStore).dir)
		}
		cmd = exec.CommandContext(ctx, bin, append(args, cfg.args...)...)
		cmd.Env = append(os.Environ(), cfg.env...)
	case planeIstio:
		if kubeconfig == "" {
			return nil, fmt.Errorf("--control-plane %s needs --source %s", planeIstio, sourceKube)
		}
		dir, err := istiobin.Build()
		if err != nil {
			return nil, err
		}
		meshConfig := filepath.Join(cp.work, "mesh.yaml")
		if err := os.WriteFile(meshConfig, []byte("defaultConfig:\n  discoveryAddress: istiod.istio-system.svc:15012\n"), 0o644); err != nil {
			return nil, err
		}
		httpsAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, filepath.Join(dir, istiobin.PilotDiscovery), append([]string{"discovery",
			"--kubeconfig", kubeconfig, "--meshConfig", meshConfig,
			"--grpcAddr", cp.grpcAddr, "--secureGRPCAddr", cp.secureAddr, "--httpAddr", cp.debugAddr,
			"--monitoringAddr", monAddr, "--httpsAddr", httpsAddr, "--log_output_level", "default:" + cfg.logLevel}, cfg.args...)...)
		// As Istio's chart sets it up, with the knobs xdsload turns.
		cmd.Env = append(os.Environ(), "POD_NAMESPACE=istio-system", "POD_NAME=istiod-0", "REVISION=default",
			"JWT_POLICY=third-party-jwt", "PILOT_CERT_PROVIDER=istiod", "CLUSTER_ID=Kubernetes",
			"ISTIOD_ADDR=istiod.istio-system.svc:15012", "PILOT_ENABLE_ANALYSIS=false", "ENABLE_CA_SERVER=true",
			"KUBECONFIG="+kubeconfig, "PILOT_ENABLE_EDS_DEBOUNCE="+strconv.FormatBool(cfg.edsDebounce),
			"PILOT_PUSH_THROTTLE="+strconv.Itoa(cfg.pushConcurrency))
		cmd.Env = append(cmd.Env, cfg.env...)
		ready = "http://" + cp.debugAddr + "/ready"
	default:
		return nil, fmt.Errorf("--control-plane %q: want %s or %s", cfg.controlPlane, planeSkiff, planeIstio)
	}
	cmd.Stderr = os.Stderr
	cmd.Dir = cp.work // istiod's relative default paths (the CA's files) land here
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	cp.closers = append(cp.closers, func() { cmd.Process.Kill(); cmd.Wait() })
	cp.pid = cmd.Process.Pid
	if err := waitReady(ctx, ready); err != nil {
		return nil, err
	}
	log.Info("control plane ready", "control-plane", cfg.controlPlane, "source", cfg.source, "pid", cp.pid,
		"services", cfg.services, "debug", cp.debugAddr)
	return cp, nil
}

// startKube starts a local kube-apiserver with Istio's CRDs and the
// benchmark's namespaces, and a store that applies the mesh to it.
func startKube(ctx context.Context) (*kubetest.Env, kubeStore, error) {
	// The mesh's cluster IPs are in 10.100.0.0/16 and 10.101.0.0/16.
	env, err := kubetest.StartEnvWith("10.96.0.0/12")
	if err != nil {
		return nil, kubeStore{}, err
	}
	fail := func(err error) (*kubetest.Env, kubeStore, error) {
		env.Stop()
		return nil, kubeStore{}, err
	}
	if err := crdtest.InstallCRDs(ctx, env.Config); err != nil {
		return fail(err)
	}
	for _, ns := range []string{benchNS, "istio-system"} {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fail(fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return fail(err)
	}
	return env, kubeStore{ctx: ctx, dyn: dyn}, nil
}
