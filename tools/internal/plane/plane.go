// Package plane starts the control plane a benchmark tool measures: Skiff's
// istiod on a directory of YAML or on a Kubernetes API server, or Istio
// 1.31's own pilot-discovery (built by pkg/istiobin) on an API server, as
// Istio's chart sets it up, so that tools/xdsload and tools/cabench measure
// the two side by side the same way.
package plane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/istiod/registry/kube/crdtest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// The control planes.
const (
	Skiff = "skiff" // Options.Istiod
	Istio = "istio" // Istio 1.31's own pilot-discovery, on an API server only
)

// Options say which control plane runs on what.
type Options struct {
	Plane  string
	Istiod string // Skiff's istiod binary
	// Kubeconfig names the API server; ConfigDir, when Kubeconfig is
	// empty, the directory Skiff's istiod watches.
	Kubeconfig, ConfigDir string
	LogLevel              string   // "warn", say
	EDSDebounce           bool     // Istio's PILOT_ENABLE_EDS_DEBOUNCE
	PushConcurrency       int      // Istio's PILOT_PUSH_THROTTLE
	Args, Env             []string // added to the process's flags and environment
}

// Process is a started control plane.
type Process struct {
	Cmd                                   *exec.Cmd
	GRPCAddr, SecureAddr, DebugAddr, Work string
	stop                                  []func()
}

// Stop kills the process and removes its working directory.
func (p *Process) Stop() {
	for i := len(p.stop) - 1; i >= 0; i-- {
		p.stop[i]()
	}
}

// Pid is the control plane's process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// FreeAddr is a free loopback address.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Start starts the control plane and waits until it is ready.
func Start(ctx context.Context, o Options) (_ *Process, err error) {
	p := &Process{}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	var monAddr string
	for _, a := range []*string{&p.GRPCAddr, &p.SecureAddr, &p.DebugAddr, &monAddr} {
		if *a, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	if p.Work, err = os.MkdirTemp("", "plane-"); err != nil {
		return nil, err
	}
	p.stop = append(p.stop, func() { os.RemoveAll(p.Work) })
	ready := "http://" + monAddr + "/ready"
	switch o.Plane {
	case Skiff:
		bin, err := filepath.Abs(o.Istiod)
		if err != nil {
			return nil, err
		}
		args := []string{"--grpcAddr", p.GRPCAddr, "--monitoringAddr", monAddr, "--secureGRPCAddr", p.SecureAddr,
			"--webhookAddr", "", "--httpAddr", p.DebugAddr, "--log-level", o.LogLevel,
			"--eds-debounce=" + strconv.FormatBool(o.EDSDebounce), "--push-concurrency", strconv.Itoa(o.PushConcurrency)}
		if o.Kubeconfig != "" {
			args = append(args, "--kubeconfig", o.Kubeconfig)
		} else {
			args = append(args, "--config-dir", o.ConfigDir)
		}
		p.Cmd = exec.CommandContext(ctx, bin, append(args, o.Args...)...)
		p.Cmd.Env = append(os.Environ(), o.Env...)
	case Istio:
		if o.Kubeconfig == "" {
			return nil, fmt.Errorf("Istio's pilot-discovery needs a Kubernetes API server")
		}
		dir, err := istiobin.Build()
		if err != nil {
			return nil, err
		}
		meshConfig := filepath.Join(p.Work, "mesh.yaml")
		if err := os.WriteFile(meshConfig, []byte("defaultConfig:\n  discoveryAddress: istiod.istio-system.svc:15012\n"), 0o644); err != nil {
			return nil, err
		}
		httpsAddr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		p.Cmd = exec.CommandContext(ctx, filepath.Join(dir, istiobin.PilotDiscovery), append([]string{"discovery",
			"--kubeconfig", o.Kubeconfig, "--meshConfig", meshConfig,
			"--grpcAddr", p.GRPCAddr, "--secureGRPCAddr", p.SecureAddr, "--httpAddr", p.DebugAddr,
			"--monitoringAddr", monAddr, "--httpsAddr", httpsAddr, "--log_output_level", "default:" + o.LogLevel}, o.Args...)...)
		// As Istio's chart sets it up, with the knobs the tools turn.
		p.Cmd.Env = append(os.Environ(), "POD_NAMESPACE=istio-system", "POD_NAME=istiod-0", "REVISION=default",
			"JWT_POLICY=third-party-jwt", "PILOT_CERT_PROVIDER=istiod", "CLUSTER_ID=Kubernetes",
			"ISTIOD_ADDR=istiod.istio-system.svc:15012", "PILOT_ENABLE_ANALYSIS=false", "ENABLE_CA_SERVER=true",
			"KUBECONFIG="+o.Kubeconfig, "PILOT_ENABLE_EDS_DEBOUNCE="+strconv.FormatBool(o.EDSDebounce),
			"PILOT_PUSH_THROTTLE="+strconv.Itoa(o.PushConcurrency))
		p.Cmd.Env = append(p.Cmd.Env, o.Env...)
		ready = "http://" + p.DebugAddr + "/ready"
	default:
		return nil, fmt.Errorf("control plane %q: want %s or %s", o.Plane, Skiff, Istio)
	}
	p.Cmd.Stderr = os.Stderr
	p.Cmd.Dir = p.Work // istiod's relative default paths (the CA's files) land here
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	p.stop = append(p.stop, func() { p.Cmd.Process.Kill(); p.Cmd.Wait() })
	if err := waitReady(ctx, ready); err != nil {
		return nil, err
	}
	return p, nil
}

// waitReady polls url until it answers 200, for up to a minute.
func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("control plane not ready at %s after a minute", url)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartKube starts a local kube-apiserver with Istio's CRDs, a cluster IP
// range of serviceCIDR and the namespaces given (istio-system is always
// made). The caller stops it.
func StartKube(ctx context.Context, serviceCIDR string, namespaces ...string) (*kubetest.Env, error) {
	env, err := kubetest.StartEnvWith(serviceCIDR)
	if err != nil {
		return nil, err
	}
	if err := crdtest.InstallCRDs(ctx, env.Config); err != nil {
		env.Stop()
		return nil, err
	}
	for _, ns := range append([]string{"istio-system"}, namespaces...) {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			env.Stop()
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	return env, nil
}
