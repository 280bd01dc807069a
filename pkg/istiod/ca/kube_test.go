package ca

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestKubernetes runs the Kubernetes-mode tests against one real
// kube-apiserver (built by `make k8s-assets`).
func TestKubernetes(t *testing.T) {
	env := kubetest.Start(t)
	createNamespace(t, env.Client, "istio-system")
	t.Run("TokenReview", func(t *testing.T) { testTokenReview(t, env) })
	t.Run("SecretPersistence", func(t *testing.T) { testSecretPersistence(t, env.Client) })
	t.Run("RootConfigMaps", func(t *testing.T) { testRootConfigMaps(t, env.Client) })
}

func createNamespace(t testing.TB, client kubernetes.Interface, name string) {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(kubetest.Context(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// requestToken asks the API server for a token of a service account, bound
// to a pod when pod is not nil.
func requestToken(t testing.TB, client kubernetes.Interface, ns, sa string, pod *corev1.Pod, audiences ...string) string {
	t.Helper()
	exp := int64(600)
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &exp}}
	if pod != nil {
		req.Spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(kubetest.Context(t), sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
	}
	return tr.Status.Token
}

// testTokenReview checks that a pod's service-account token gets a
// certificate for exactly its identity, and that a CSR for another service
// account, an expired token, a token signed by an untrusted key and a
// wrong-audience token are refused.
func testTokenReview(t *testing.T, env *kubetest.Env) {
	client := env.Client
	ctx := kubetest.Context(t)
	const ns = "workloads"
	createNamespace(t, client, ns)
	sas := map[string]*corev1.ServiceAccount{}
	for _, name := range []string{"app", "admin"} {
		sa, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sas[name] = sa
	}
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app-0"},
		Spec:       corev1.PodSpec{ServiceAccountName: "app", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	c, err := New(ctx, Config{
		Client:                     client.CoreV1().RESTClient(),
		DisableConfigMapPublishing: true,
		Authenticators:             []Authenticator{NewTokenReviewAuthenticator(client.AuthenticationV1().RESTClient(), "cluster.local")},
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	cl := client0(t, c)

	const appSAN = "spiffe://cluster.local/ns/workloads/sa/app"
	const adminSAN = "spiffe://cluster.local/ns/workloads/sa/admin"
	podToken := requestToken(t, client, ns, "app", pod, "istio-ca")
	adminToken := requestToken(t, client, ns, "admin", nil, "istio-ca")
	wrongAud := requestToken(t, client, ns, "app", pod, "other")

	// The API server's own signing key mints tokens like its own but with
	// any expiry: TokenRequest clamps expirationSeconds to at least 10
	// minutes, so an expired token cannot be had from it in a test. A
	// token signed the same way but not expired is accepted, which shows
	// the expired one is refused for its expiry alone.
	saKeyPEM, err := os.ReadFile(filepath.Join(env.Dir, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	saKey, err := pki.ParsePrivateKey(saKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	craftedValid := signWith(t, saKey, env.URL, ns, sas["app"], pod, now.Add(-time.Minute), now.Add(time.Hour))
	craftedExpired := signWith(t, saKey, env.URL, ns, sas["app"], pod, now.Add(-2*time.Hour), now.Add(-time.Hour))
	strangerKey, _ := pki.GenerateKey(pki.RSA2048)
	untrusted := signWith(t, strangerKey, env.URL, ns, sas["app"], pod, now.Add(-time.Minute), now.Add(time.Hour))

	tests := []struct {
		name  string
		token string
		san   string
		code  codes.Code
		msg   string
	}{
		{"pod token, own identity", podToken, appSAN, codes.OK, ""},
		{"pod token, another service account", podToken, adminSAN, codes.PermissionDenied, `SAN "URI:` + adminSAN + `"`},
		{"admin token, app identity", adminToken, appSAN, codes.PermissionDenied, `SAN "URI:` + appSAN + `"`},
		{"admin token, own identity", adminToken, adminSAN, codes.OK, ""},
		{"wrong audience", wrongAud, appSAN, codes.Unauthenticated, `token audiences ["other"] is invalid`},
		{"crafted with the server's key, valid", craftedValid, appSAN, codes.OK, ""},
		{"expired", craftedExpired, appSAN, codes.Unauthenticated, "expired"},
		{"signed by an untrusted key", untrusted, appSAN, codes.Unauthenticated, "invalid bearer token"},
		{"garbage token", "not-a-token", appSAN, codes.Unauthenticated, "invalid bearer token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, csr := newCSR(t, pki.ECDSAP256, tt.san)
			resp, err := cl.CreateCertificate(withToken(ctxT(t), tt.token), &pb.IstioCertificateRequest{Csr: csr, ValidityDuration: 3600})
			if status.Code(err) != tt.code || (err != nil && !strings.Contains(err.Error(), tt.msg)) {
				t.Fatalf("error = %v, want %v containing %q", err, tt.code, tt.msg)
			}
			if err != nil {
				t.Logf("refused as expected: %v", err)
				return
			}
			leaf, _, roots := parseChain(t, resp.CertChain)
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != tt.san {
				t.Errorf("leaf URIs %v, want exactly %s", leaf.URIs, tt.san)
			}
			if _, err := roots.Verify([]*x509.Certificate{leaf}, time.Now()); err != nil {
				t.Error(err)
			}
		})
	}

	// The JWT verifier of file mode accepts the API server's real
	// projected tokens when given its public key.
	pub, err := os.ReadFile(filepath.Join(env.Dir, "sa.pub"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParsePublicKeys(pub)
	if err != nil {
		t.Fatal(err)
	}
	ja, err := NewJWTAuthenticator(JWTConfig{Issuer: env.URL, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := ja.Verify(podToken); err != nil || id.String() != appSAN {
		t.Errorf("JWT verifier on a real pod token: %v, %v", id, err)
	}
	if _, err := ja.Verify(wrongAud); err == nil {
		t.Error("JWT verifier accepted a wrong-audience token")
	}
	if _, err := ja.Verify(craftedExpired); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("JWT verifier on an expired token: %v", err)
	}
}

func signWith(t testing.TB, key crypto.Signer, iss, ns string, sa *corev1.ServiceAccount, pod *corev1.Pod, iat, exp time.Time) string {
	t.Helper()
	tok, err := SignToken(key, TokenClaims{
		Issuer: iss, Audiences: []string{"istio-ca"}, Namespace: ns, ServiceAccount: sa.Name,
		ServiceAccountUID: string(sa.UID), PodName: pod.Name, PodUID: string(pod.UID),
		IssuedAt: iat, Expiry: exp,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// client0 serves the CA over TLS on loopback and returns a client trusting it.
func client0(t testing.TB, c *CA) pb.IstioCertificateServiceClient {
	return client(t, serve(t, c), c.Roots(), nil)
}

// testSecretPersistence checks the istio-ca-secret: created on first start
// with Istio's keys and type, reused on restart, followed when edited, and
// one root when two istiods start at once.
func testSecretPersistence(t *testing.T, client kubernetes.Interface) {
	ctx := kubetest.Context(t)
	cfg := Config{Client: client.CoreV1().RESTClient(), DisableConfigMapPublishing: true}
	first, err := New(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := client.CoreV1().Secrets("istio-system").Get(ctx, SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != SecretType {
		t.Errorf("secret type %q, want %q", s.Type, SecretType)
	}
	for _, k := range []string{CACertFile, CAKeyFile, CertChainFile, RootCertFile} {
		if _, ok := s.Data[k]; !ok {
			t.Errorf("secret lacks key %s", k)
		}
	}
	if !bytes.Equal(s.Data[CACertFile], pki.EncodeCertificates(first.Issuer())) {
		t.Error("secret ca-cert.pem is not the CA's root")
	}
	second, err := New(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !second.Issuer().Equal(first.Issuer()) {
		t.Error("restart made a new root instead of reading the secret")
	}

	// Editing the secret switches the issuer without a restart; material
	// that does not fit together is ignored.
	runCA(t, first)
	b := newPluggedCA(t, "secret")
	update := func(files map[string][]byte) {
		t.Helper()
		s, err := client.CoreV1().Secrets("istio-system").Get(ctx, SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data = files
		if _, err := client.CoreV1().Secrets("istio-system").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	oldRoot, rejected := first.Issuer(), first.Stats().Rejected
	update(map[string][]byte{CACertFile: b.interPEM, CAKeyFile: s.Data[CAKeyFile], RootCertFile: b.rootPEM})
	polltest.Until(t, "the secret watcher to reject the mismatched key", func() bool { return first.Stats().Rejected > rejected })
	if !first.Issuer().Equal(oldRoot) {
		t.Fatal("issuer switched to a certificate whose key is not in the secret")
	}
	update(b.files(b))
	polltest.Until(t, "issuer from the edited secret", func() bool { return first.Issuer().Equal(b.inter) })

	// Two istiods racing to create the secret end up with one root.
	createNamespace(t, client, "race-system")
	var (
		wg    sync.WaitGroup
		roots [4]*x509.Certificate
		errs  [4]error
	)
	for i := range roots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := New(ctx, Config{Client: client.CoreV1().RESTClient(), Namespace: "race-system", DisableConfigMapPublishing: true}, testLogger(t))
			if err != nil {
				errs[i] = err
				return
			}
			roots[i] = c.Issuer()
		}()
	}
	wg.Wait()
	for i := range roots {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !roots[i].Equal(roots[0]) {
			t.Errorf("istiod %d has a different root", i)
		}
	}
}

// testRootConfigMaps checks the istio-ca-root-cert ConfigMaps: present in
// every namespace, new ones included, repaired after edits and deletes, and
// updated when the root bundle changes (plug-in CA files rewritten).
func testRootConfigMaps(t *testing.T, client kubernetes.Interface) {
	ctx := kubetest.Context(t)
	a, b := newPluggedCA(t, "A"), newPluggedCA(t, "B")
	dir := t.TempDir()
	writeFiles(t, dir, a.files(a))
	createNamespace(t, client, "cm-before")
	c, err := New(ctx, Config{Client: client.CoreV1().RESTClient(), PluginCertsDir: dir}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	runCA(t, c)
	cms := func(ns string) func() string {
		return func() string {
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, RootConfigMapName, metav1.GetOptions{})
			if err != nil {
				return ""
			}
			return cm.Data[RootConfigMapKey]
		}
	}
	waitCM := func(ns string, want []byte) {
		t.Helper()
		polltest.Until(t, "configmap in "+ns, func() bool { return cms(ns)() == string(want) })
	}
	for _, ns := range []string{"default", "kube-system", "istio-system", "cm-before"} {
		waitCM(ns, a.rootPEM)
	}
	createNamespace(t, client, "cm-after")
	waitCM("cm-after", a.rootPEM)

	// An edit is reverted; a delete is undone.
	cm, err := client.CoreV1().ConfigMaps("cm-after").Get(ctx, RootConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[RootConfigMapKey] = "tampered"
	if _, err := client.CoreV1().ConfigMaps("cm-after").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCM("cm-after", a.rootPEM)
	if err := client.CoreV1().ConfigMaps("cm-before").Delete(ctx, RootConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCM("cm-before", a.rootPEM)

	// New roots reach every namespace.
	writeFiles(t, dir, b.files(b, a))
	want := append(append([]byte(nil), b.rootPEM...), a.rootPEM...)
	for _, ns := range []string{"default", "cm-before", "cm-after"} {
		waitCM(ns, want)
	}
}
