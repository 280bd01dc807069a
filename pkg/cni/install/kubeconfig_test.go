package install

import (
	"context"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/cni/kubeapi"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

// TestKubeconfigTrust writes the plugin's kubeconfig as Istio's settings ask
// and has the plugin's own API client read a pod with it from a TLS server:
// with the service account's CA (not this server's, so refused), with
// KUBE_CA_FILE naming the server's CA, and with SKIP_TLS_VERIFY.
func TestKubeconfigTrust(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/default/pods/app-0" || r.Header.Get("Authorization") != "Bearer token-1" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"metadata": {"name": "app-0", "namespace": "default"}}`))
	}))
	defer api.Close()
	host, port, _ := net.SplitHostPort(api.Listener.Addr().String())
	serverCA := filepath.Join(t.TempDir(), "api-ca.pem")
	must(t, os.WriteFile(serverCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o644))

	for _, tc := range []struct {
		name    string
		set     func(*Config)
		reaches bool
	}{
		{"the service account's CA", func(*Config) {}, false},
		{"KUBE_CA_FILE", func(c *Config) { c.KubeCAFile = serverCA }, true},
		{"SKIP_TLS_VERIFY", func(c *Config) { c.SkipTLSVerify = true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			must(t, os.WriteFile(tr.cfg.CAPath, otherRoot(t), 0o644))
			tr.cfg.KubeHost = host
			p, _ := strconv.Atoi(port)
			tr.cfg.KubePort = uint16(p)
			tc.set(&tr.cfg)
			in, err := New(tr.cfg, discard())
			if err != nil {
				t.Fatal(err)
			}
			must(t, in.installKubeconfig())
			getter, err := kubeapi.New(filepath.Join(tr.cfg.AgentRunDir, cni.KubeconfigName))
			if err != nil {
				t.Fatal(err)
			}
			pod, err := getter.GetPod(context.Background(), "default", "app-0")
			if tc.reaches && (err != nil || pod.Metadata.Name != "app-0") {
				t.Errorf("pod through the kubeconfig: %v %v", pod, err)
			}
			if !tc.reaches && err == nil {
				t.Error("the API server's certificate was not checked against the service account's CA")
			}
		})
	}
}

// TestKubeconfigMode: the kubeconfig gets KUBECONFIG_MODE, also when only
// the mode changed.
func TestKubeconfigMode(t *testing.T) {
	tr := newTree(t)
	path := filepath.Join(tr.cfg.AgentRunDir, cni.KubeconfigName)
	for _, mode := range []os.FileMode{0, 0o640, 0o600} {
		tr.cfg.KubeconfigMode = mode
		in, err := New(tr.cfg, discard())
		if err != nil {
			t.Fatal(err)
		}
		must(t, in.installKubeconfig())
		want := mode
		if want == 0 {
			want = DefaultKubeconfigMode
		}
		if got := fileMode(path); got != want {
			t.Errorf("KubeconfigMode %#o: file mode %#o, want %#o", mode, got, want)
		}
	}
}

// otherRoot is a CA certificate, PEM, that signed nothing the test serves.
func otherRoot(t *testing.T) []byte {
	t.Helper()
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	root, err := pki.NewRoot(key, pkix.Name{CommonName: "someone else's CA"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pki.EncodeCertificates(root)
}
