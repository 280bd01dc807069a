package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/tools/internal/plane"
)

// runKube measures CreateCertificate as a cluster's workloads call it: the
// control plane (Skiff's istiod, or Istio's own pilot-discovery) reads a
// local kube-apiserver and checks each call's token, a real service account
// token for the istio-ca audience, with a TokenReview, as Istio's does.
func runKube(o options) error {
	ctx := context.Background()
	load0 := loadAvg()
	env, err := plane.StartKube(ctx, kubetest.DefaultServiceCIDR)
	if err != nil {
		return err
	}
	defer env.Stop()
	if _, err := env.Client.CoreV1().ServiceAccounts("default").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("service account: %w", err)
	}
	exp := int64(3600)
	tok, err := env.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "app",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{"istio-ca"}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	p, err := plane.Start(ctx, plane.Options{Plane: o.plane, Istiod: o.istiod, Kubeconfig: env.Kubeconfig,
		LogLevel: "warn", EDSDebounce: true, PushConcurrency: 100, Args: o.planeArgs})
	if err != nil {
		return err
	}
	defer p.Stop()
	roots, err := meshRoots(ctx, env)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "cabench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv := &server{addr: p.SecureAddr, cmd: p.Cmd}
	var rows []result
	for _, kt := range []pki.KeyType{pki.ECDSAP256, pki.RSA2048} {
		csrs, _, err := makeCSRs(kt, o.pool, filepath.Join(dir, kt.String()))
		if err != nil {
			return err
		}
		for _, conc := range o.conc {
			fmt.Fprintf(os.Stderr, "%v: gRPC, %d callers, %s\n", kt, conc, o.plane)
			r, err := benchGRPC(srv, roots, tok.Status.Token, csrs, o.n, conc)
			if err != nil {
				return err
			}
			r.impl = fmt.Sprintf("%s, CreateCertificate over gRPC+TLS, TokenReview per call, %d callers", map[string]string{
				plane.Skiff: "Skiff's istiod", plane.Istio: "Istio 1.31's pilot-discovery"}[o.plane], conc)
			r.key = kt.String()
			rows = append(rows, r)
		}
	}
	fmt.Printf("%d CPUs, load average at the start %.2f and at the end %.2f; control plane %s %v on a local kube-apiserver;\n"+
		"gRPC: one TLS connection, a service account token (TokenRequest) checked by TokenReview;\n"+
		"CPU per CSR: the control plane's process (the API server's is not counted); load generator: this process\n\n",
		runtime.NumCPU(), load0, loadAvg(), o.plane, o.planeArgs)
	fmt.Println("| signer | CSR key | CSRs | CSRs/s | p50 | p99 | CPU per CSR | load generator CPU per CSR |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r.row())
	}
	return nil
}

// meshRoots waits for the mesh root the control plane publishes in every
// namespace (the istio-ca-root-cert ConfigMap) and returns it.
func meshRoots(ctx context.Context, env *kubetest.Env) (*pki.Bundle, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		cm, err := env.Client.CoreV1().ConfigMaps("default").Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err == nil && cm.Data["root-cert.pem"] != "" {
			return pki.ParseBundle([]byte(cm.Data["root-cert.pem"]))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no istio-ca-root-cert in namespace default after a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
