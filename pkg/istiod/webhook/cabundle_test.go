package webhook_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// roots is a RootSource whose bundle the test sets (rotation).
type roots struct {
	mu      sync.Mutex
	pem     []byte
	changed chan struct{}
}

func newRoots(pem []byte) *roots { return &roots{pem: pem, changed: make(chan struct{})} }

func (r *roots) RootCertPEM() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pem
}

func (r *roots) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *roots) set(pem []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pem = pem
	close(r.changed)
	r.changed = make(chan struct{})
}

var _ webhook.RootSource = (*roots)(nil)
var _ webhook.RootSource = (*ca.CA)(nil)

// newRootPEM returns the root of a fresh CA (file mode).
func newRootPEM(t testing.TB) []byte {
	t.Helper()
	c, err := ca.New(context.Background(), ca.Config{SelfSignedDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.RootCertPEM()
}

// lines records log messages (and writes them to t when set).
type lines struct {
	t    testing.TB
	mu   sync.Mutex
	msgs []string
}

// testLogTee returns a logger that writes to t and records in l.
func testLogTee(t testing.TB, l *lines) *slog.Logger {
	l.t = t
	return slog.New(l)
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *lines) WithGroup(string) slog.Handler            { return l }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	if l.t != nil {
		l.t.Log(b.String())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, b.String())
	return nil
}

// count returns how many lines contain every part.
func (l *lines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(m, p)
		}
		if all {
			n++
		}
	}
	return n
}

// runPatcher runs a patcher until the test ends.
func runPatcher(t *testing.T, o webhook.PatcherOptions) {
	t.Helper()
	p, err := webhook.NewConfigurationPatcher(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("patcher: %v", err)
		}
	})
}

// chartConfigs creates the revision's webhook configurations as the chart
// installs them (manifests' TestWebhookConfigurationsMatchGo holds them
// equal): no caBundle, validation failing open.
func chartConfigs(t testing.TB, client kubernetes.Interface, rev string) (mutating, validating string) {
	t.Helper()
	ctx := kubetest.Context(t)
	o := webhook.ConfigurationOptions{Revision: rev, ValidationFailurePolicy: admissionregv1.Ignore}
	mw, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhook.MutatingConfiguration(o), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vw, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhook.ValidatingConfiguration(o), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mw.Name, vw.Name
}

// state is what the patcher manages in the two configurations.
type state struct {
	mutatingCA, validatingCA [][]byte
	policies                 []admissionregv1.FailurePolicyType
	mutatingRV, validatingRV string
}

func getState(t testing.TB, client kubernetes.Interface, mutating, validating string) state {
	t.Helper()
	ctx := kubetest.Context(t)
	var s state
	mw, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range mw.Webhooks {
		s.mutatingCA = append(s.mutatingCA, w.ClientConfig.CABundle)
	}
	vw, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, validating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range vw.Webhooks {
		s.validatingCA = append(s.validatingCA, w.ClientConfig.CABundle)
		s.policies = append(s.policies, *w.FailurePolicy)
	}
	s.mutatingRV, s.validatingRV = mw.ResourceVersion, vw.ResourceVersion
	return s
}

func allEqual(bs [][]byte, want []byte) bool {
	for _, b := range bs {
		if !bytes.Equal(b, want) {
			return false
		}
	}
	return len(bs) > 0
}

func (s state) patchedWith(root []byte) bool {
	return allEqual(s.mutatingCA, root) && allEqual(s.validatingCA, root)
}

func (s state) policy() admissionregv1.FailurePolicyType {
	for _, p := range s.policies {
		if p != s.policies[0] {
			return "mixed"
		}
	}
	return s.policies[0]
}

// TestPatcherRealAPIServer: against a real kube-apiserver the patcher
// fills in the caBundle of its revision's configurations, fails validation
// closed only once ready, undoes an edit that resets the caBundle, follows
// a root rotation, and leaves other revisions' and unlabelled
// configurations alone.
func TestPatcherRealAPIServer(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // runs last, after the patcher and the API server stopped
	env := kubetest.Start(t)
	client := env.Client
	ctx := kubetest.Context(t)
	mName, vName := chartConfigs(t, client, "default")
	cmName, cvName := chartConfigs(t, client, "canary")
	// A configuration istiod does not own: no istio.io/rev label, although
	// its webhook's name ends like Istio's.
	foreign := webhook.MutatingConfiguration(webhook.ConfigurationOptions{})
	foreign.Name, foreign.Labels = netnstest.UniqueName("foreign-"), map[string]string{"app": "other"}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := getState(t, client, cmName, cvName)
	foreignBefore, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, foreign.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	root1, root2 := newRootPEM(t), newRootPEM(t)
	rs := newRoots(root1)
	ready := make(chan struct{})
	log := &lines{}
	runPatcher(t, webhook.PatcherOptions{
		Client: client.AdmissionregistrationV1().RESTClient(), Roots: rs, Log: slog.New(log),
		Ready: func(context.Context, *admissionregv1.ValidatingWebhookConfiguration) error {
			select {
			case <-ready:
				return nil
			default:
				return errTestNotReady
			}
		},
	})

	polltest.Until(t, "caBundle patched in both configurations", func() bool {
		return getState(t, client, mName, vName).patchedWith(root1)
	})
	if p := getState(t, client, mName, vName).policy(); p != admissionregv1.Ignore {
		t.Errorf("failurePolicy %s before the webhook is ready, want Ignore", p)
	}
	polltest.Until(t, "readiness asked after the patch", func() bool {
		return log.count("not yet switching validation", errTestNotReady.Error()) > 0
	})
	close(ready)
	polltest.Until(t, "failurePolicy Fail once ready", func() bool {
		return getState(t, client, mName, vName).policy() == admissionregv1.Fail
	})

	t.Run("an edit resetting caBundle is undone", func(t *testing.T) {
		mw, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range mw.Webhooks {
			mw.Webhooks[i].ClientConfig.CABundle = nil
		}
		if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mw, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		vw, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, vName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ignore := admissionregv1.Ignore
		for i := range vw.Webhooks {
			vw.Webhooks[i].ClientConfig.CABundle = []byte("stale")
			vw.Webhooks[i].FailurePolicy = &ignore // as a helm upgrade to the chart's install state
		}
		if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vw, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		polltest.Until(t, "caBundle and failurePolicy restored", func() bool {
			s := getState(t, client, mName, vName)
			return s.patchedWith(root1) && s.policy() == admissionregv1.Fail
		})
	})

	t.Run("root rotation is followed", func(t *testing.T) {
		rs.set(root2)
		polltest.Until(t, "caBundle is the new root", func() bool {
			return getState(t, client, mName, vName).patchedWith(root2)
		})
	})

	t.Run("dry-run readiness without Istio's CRDs", func(t *testing.T) {
		ic, err := istioclient.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		vw, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, vName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := webhook.DryRunReady(ic.NetworkingV1().RESTClient(), "default", "default")(ctx, vw); err != nil {
			t.Errorf("no VirtualService CRD means nothing to validate (ready), got %v", err)
		}
	})

	t.Run("other configurations untouched", func(t *testing.T) {
		after := getState(t, client, cmName, cvName)
		if after.mutatingRV != before.mutatingRV || after.validatingRV != before.validatingRV {
			t.Errorf("canary configurations changed: resourceVersions %s/%s, were %s/%s", after.mutatingRV, after.validatingRV, before.mutatingRV, before.validatingRV)
		}
		f, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, foreign.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f.ResourceVersion != foreignBefore.ResourceVersion {
			t.Errorf("unlabelled configuration changed: resourceVersion %s, was %s", f.ResourceVersion, foreignBefore.ResourceVersion)
		}
	})

	t.Run("a patcher told to skip injection", func(t *testing.T) {
		runPatcher(t, webhook.PatcherOptions{Client: client.AdmissionregistrationV1().RESTClient(), Roots: rs, Revision: "canary", SkipMutating: true})
		polltest.Until(t, "canary validation patched", func() bool {
			return allEqual(getState(t, client, cmName, cvName).validatingCA, root2)
		})
		if after := getState(t, client, cmName, cvName); after.mutatingRV != before.mutatingRV {
			t.Errorf("canary injection configuration changed: resourceVersion %s, was %s", after.mutatingRV, before.mutatingRV)
		}
	})

	// One line per object per change: the first patch, the reset, the rotation.
	for _, name := range []string{mName, vName} {
		if n := log.count("patched caBundle", "name="+name+" "); n != 3 {
			t.Errorf("%d \"patched caBundle\" lines for %s, want 3 (patch, reset, rotation):\n%s", n, name, strings.Join(log.msgs, "\n"))
		}
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTestNotReady = testError("test says not ready")
