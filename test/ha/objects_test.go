package ha_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/istiod/webhook"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func mustCreateNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func holder(ctx context.Context, c kubernetes.Interface, name string) string {
	l, err := c.CoordinationV1().Leases("istio-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// secretRoot returns the self-signed root the replicas share.
func secretRoot(ctx context.Context, t *testing.T, c kubernetes.Interface) []byte {
	t.Helper()
	s, err := c.CoreV1().Secrets("istio-system").Get(ctx, ca.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Data[ca.RootCertFile]; len(r) > 0 {
		return r
	}
	return s.Data[ca.CACertFile]
}

func waitPublished(ctx context.Context, t *testing.T, c kubernetes.Interface, root []byte, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		polltest.Within(t, 15*time.Second, "root ConfigMap in "+ns, func() bool {
			cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, ca.RootConfigMapName, metav1.GetOptions{})
			return err == nil && bytes.Contains([]byte(cm.Data[ca.RootConfigMapKey]), bytes.TrimSpace(root))
		})
	}
}

func waitCABundles(ctx context.Context, t *testing.T, c kubernetes.Interface, root []byte) {
	t.Helper()
	a := c.AdmissionregistrationV1()
	polltest.Within(t, 15*time.Second, "caBundles patched with the root", func() bool {
		m, err := a.MutatingWebhookConfigurations().Get(ctx, webhook.MutatingConfiguration(webhook.ConfigurationOptions{}).Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		v, err := a.ValidatingWebhookConfigurations().Get(ctx, webhook.ValidatingConfiguration(validatingOptions).Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cc := range append(clientConfigs(m.Webhooks), validatingClientConfigs(v.Webhooks)...) {
			if !bytes.Contains(cc.CABundle, bytes.TrimSpace(root)) {
				return false
			}
		}
		return true
	})
}

func clientConfigs(whs []admissionregv1.MutatingWebhook) []admissionregv1.WebhookClientConfig {
	var out []admissionregv1.WebhookClientConfig
	for _, w := range whs {
		out = append(out, w.ClientConfig)
	}
	return out
}

func validatingClientConfigs(whs []admissionregv1.ValidatingWebhook) []admissionregv1.WebhookClientConfig {
	var out []admissionregv1.WebhookClientConfig
	for _, w := range whs {
		out = append(out, w.ClientConfig)
	}
	return out
}

// breakCABundle empties the first injection webhook's caBundle, as a helm
// upgrade resetting the configuration would.
func breakCABundle(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	mws := c.AdmissionregistrationV1().MutatingWebhookConfigurations()
	m, err := mws.Get(ctx, webhook.MutatingConfiguration(webhook.ConfigurationOptions{}).Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := mws.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// echoEntry is a ServiceEntry for echo.ha.test:9080 with one endpoint, b
// (EndpointSlices may not hold loopback addresses; ServiceEntries may).
func echoEntry(b *proxylesstest.Backend) *networkingv1.ServiceEntry {
	return &networkingv1.ServiceEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: networkingapi.ServiceEntry{
			Hosts:      []string{"echo.ha.test"},
			Ports:      []*networkingapi.ServicePort{{Number: 9080, Name: "grpc", Protocol: "GRPC"}},
			Location:   networkingapi.ServiceEntry_MESH_INTERNAL,
			Resolution: networkingapi.ServiceEntry_STATIC,
			Endpoints:  []*networkingapi.WorkloadEntry{{Address: "127.0.0.1", Ports: map[string]uint32{"grpc": uint32(b.Port)}, Labels: map[string]string{"backend": b.Name}}},
		},
	}
}

// createEcho makes the echo ServiceEntry with endpoint b.
func createEcho(ctx context.Context, t *testing.T, c istioclient.Interface, b *proxylesstest.Backend) {
	t.Helper()
	if _, err := c.NetworkingV1().ServiceEntries("default").Create(ctx, echoEntry(b), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// moveEcho points echo's endpoint at b.
func moveEcho(ctx context.Context, t *testing.T, c istioclient.Interface, b *proxylesstest.Backend) {
	t.Helper()
	ses := c.NetworkingV1().ServiceEntries("default")
	cur, err := ses.Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := echoEntry(b)
	next.ResourceVersion = cur.ResourceVersion
	if _, err := ses.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// holdStaleLease creates Lease name held by id for an hour: a replica that
// vanished without releasing it.
func holdStaleLease(ctx context.Context, t *testing.T, c kubernetes.Interface, name, id string) {
	t.Helper()
	secs := int32(3600)
	now := metav1.NewMicroTime(time.Now())
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "istio-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
	if _, err := c.CoordinationV1().Leases("istio-system").Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
