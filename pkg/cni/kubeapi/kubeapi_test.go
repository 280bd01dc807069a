package kubeapi

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// TestKubeconfigErrors: a kubeconfig the helper cannot use is a
// *cni.KubeconfigError naming the file and what is wrong.
func TestKubeconfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"not YAML", "clusters: [", "parse kubeconfig"},
		{"no server", "current-context: c\ncontexts: [{name: c, context: {cluster: x, user: u}}]\n", `no cluster server for context "c"`},
		{"CA not PEM", "current-context: c\ncontexts: [{name: c, context: {cluster: x, user: u}}]\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: aGVsbG8=}}]\n", "no PEM certificate"},
		{"token file missing", "current-context: c\ncontexts: [{name: c, context: {cluster: x, user: u}}]\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {tokenFile: /nonexistent/token}}]\n", "read token"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Lookup(context.Background(), cni.Lookup{Kubeconfig: path, Namespace: "a", Name: "b", Tries: 1})
		var kerr *cni.KubeconfigError
		if !errors.As(err, &kerr) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want a kubeconfig error naming %s and %q", tc.name, err, path, tc.want)
		}
	}
	if _, err := Lookup(context.Background(), cni.Lookup{Kubeconfig: filepath.Join(dir, "absent"), Tries: 1}); err == nil || !strings.Contains(err.Error(), "read kubeconfig") {
		t.Errorf("absent kubeconfig: %v", err)
	}
}

// TestLookupRetries: a pod the API server does not know yet is asked for
// again, Interval apart, with the token, until it appears or the tries end.
func TestLookupRetries(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != "/api/v1/namespaces/shop/pods/web-0" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		if asked.Add(1) < 3 {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"metadata":{"name":"web-0","namespace":"shop"}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := kubetest.WriteKubeconfig(kc, srv.URL, ca, "tok"); err != nil {
		t.Fatal(err)
	}
	l := cni.Lookup{Kubeconfig: kc, Namespace: "shop", Name: "web-0", Tries: 3, Interval: time.Millisecond}
	pod, err := Lookup(context.Background(), l)
	if err != nil || pod.Metadata.Name != "web-0" || asked.Load() != 3 {
		t.Fatalf("pod %+v, err %v after %d asks; want it on the third", pod, err, asked.Load())
	}
	asked.Store(0)
	l.Tries = 2
	if _, err := Lookup(context.Background(), l); !errors.Is(err, ErrPodNotFound) || !strings.Contains(err.Error(), "shop/web-0 (2 tries)") {
		t.Errorf("two tries: %v, want not found after 2 tries", err)
	}
	l.Name = "other"
	if _, err := Lookup(context.Background(), l); err == nil || !strings.Contains(err.Error(), "403 Forbidden: forbidden") {
		t.Errorf("forbidden: %v, want the status and body", err)
	}
}

// TestDecodePod: 200 is a pod, 404 ErrPodNotFound, anything else an error
// with the status and body.
func TestDecodePod(t *testing.T) {
	p, err := decodePod("src", 200, []byte(`{"metadata":{"name":"a","namespace":"b"}}`))
	if err != nil || p.Metadata.Name != "a" {
		t.Errorf("200: %+v %v", p, err)
	}
	if _, err := decodePod("src", 404, nil); !errors.Is(err, ErrPodNotFound) {
		t.Errorf("404: %v", err)
	}
	if _, err := decodePod("src", 503, []byte("overloaded\n")); err == nil || !strings.Contains(err.Error(), "GET src: 503 Service Unavailable: overloaded") {
		t.Errorf("503: %v", err)
	}
	if _, err := decodePod("src", 200, []byte(`{`)); err == nil || !strings.Contains(err.Error(), "decode pod from src") {
		t.Errorf("bad JSON: %v", err)
	}
}
