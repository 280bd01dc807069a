// Package kubetest runs a real etcd and kube-apiserver on loopback for tests
// (envtest style). The binaries are built once per machine by
// `make k8s-assets` into K8S_ASSETS (default ~/.cache/skiff/k8s/v1.37.2).
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is the Kubernetes version the harness builds and runs.
const Version = "1.37.2"

// Env is a running API server.
type Env struct {
	// URL is the API server's https address on loopback.
	URL string
	// Config authenticates as a cluster admin (system:masters).
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for Config.
	Kubeconfig string
	// CAFile verifies the API server's serving certificate.
	CAFile string
	// Dir holds the server's files; it is removed on Stop.
	Dir string

	procs []*exec.Cmd
}

// AssetsDir returns where kube-apiserver and etcd are, or an error telling
// how to build them.
func AssetsDir() (string, error) {
	dir := os.Getenv("K8S_ASSETS")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".cache", "skiff", "k8s", "v"+Version)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run `make k8s-assets` (builds it once per machine)", b, dir)
		}
	}
	return dir, nil
}

// Start runs etcd and kube-apiserver for the test and stops them when it ends.
func Start(t testing.TB) *Env {
	t.Helper()
	env, err := StartEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	return env
}

// startAttempts is how many times StartEnv tries with fresh ports: a port
// picked free can be taken by another test package's server before etcd
// or kube-apiserver binds it (packages run at once).
const startAttempts = 3

// DefaultServiceCIDR is the cluster IP range StartEnv gives the API server.
const DefaultServiceCIDR = "10.0.0.0/24"

// StartEnv runs etcd and kube-apiserver; the caller must Stop it (for TestMain).
func StartEnv() (*Env, error) { return StartEnvWith(DefaultServiceCIDR) }

// StartEnvWith is StartEnv with another cluster IP range (a /12 holds
// the thousands of Services of a benchmark).
func StartEnvWith(serviceCIDR string) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range startAttempts {
		dir, err := os.MkdirTemp("", "kubetest-")
		if err != nil {
			return nil, err
		}
		env := &Env{Dir: dir}
		if err := env.start(assets, serviceCIDR); err != nil {
			env.Stop()
			errs = append(errs, err)
			continue
		}
		return env, nil
	}
	return nil, fmt.Errorf("kube-apiserver did not start in %d attempts: %w", startAttempts, errors.Join(errs...))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (e *Env) start(assets, serviceCIDR string) error {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])

	if err := e.spawn(filepath.Join(assets, "etcd"), "etcd",
		"--name=default", "--data-dir="+filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync", "--log-level=error"); err != nil {
		return err
	}

	token := randomHex(16)
	if err := os.WriteFile(filepath.Join(e.Dir, "tokens.csv"), []byte(token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return err
	}
	if err := writeServiceAccountKey(e.Dir); err != nil {
		return err
	}
	certDir := filepath.Join(e.Dir, "certs")
	if err := e.spawn(filepath.Join(assets, "kube-apiserver"), "kube-apiserver",
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[2]), "--cert-dir="+certDir,
		"--service-account-issuer="+e.URL, "--api-audiences="+e.URL+",istio-ca",
		"--service-account-key-file="+filepath.Join(e.Dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(e.Dir, "sa.key"),
		"--service-cluster-ip-range="+serviceCIDR, "--authorization-mode=RBAC",
		"--token-auth-file="+filepath.Join(e.Dir, "tokens.csv"),
		"--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false", "--v=0"); err != nil {
		return err
	}
	e.CAFile = filepath.Join(certDir, "apiserver.crt")
	e.Config = &rest.Config{Host: e.URL, BearerToken: token, QPS: 1000, Burst: 1000}
	if err := e.waitReady(30 * time.Second); err != nil {
		return err
	}
	e.Config.TLSClientConfig = rest.TLSClientConfig{CAFile: e.CAFile}
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	e.Client = client
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	return WriteKubeconfig(e.Kubeconfig, e.URL, e.CAFile, token)
}

func (e *Env) spawn(bin, name string, args ...string) error {
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(e.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	e.procs = append(e.procs, cmd)
	return nil
}

// waitReady polls /readyz until the server answers 200 (its certificate
// exists only once it is up, so this poll skips verification).
func (e *Env) waitReady(timeout time.Duration) error {
	cfg := rest.CopyConfig(e.Config)
	cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: rt, Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(e.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		for _, p := range e.procs {
			if p.ProcessState != nil {
				return fmt.Errorf("%s exited; see %s", p.Path, e.Dir)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	logs, _ := os.ReadFile(filepath.Join(e.Dir, "kube-apiserver.log"))
	return fmt.Errorf("kube-apiserver not ready after %s:\n%s", timeout, tail(logs, 3000))
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Stop ends the processes and removes the files.
func (e *Env) Stop() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		p := e.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	e.procs = nil
	_ = os.RemoveAll(e.Dir)
}

// WriteKubeconfig writes a kubeconfig (mode 0600) for a server, CA file and bearer token.
func WriteKubeconfig(path, server, caFile, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "local"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func writeServiceAccountKey(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return errors.Join(
		os.WriteFile(filepath.Join(dir, "sa.key"), priv, 0o600),
		os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644),
	)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Context returns a context for API calls that ends with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
