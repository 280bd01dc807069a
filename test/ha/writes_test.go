package ha_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-mesh/skiff/pkg/istiod/ca"
)

// writeCounter counts the changes the API server reports for the objects
// istiod's singletons write: every istio-ca-root-cert ConfigMap and every
// webhook configuration.
type writeCounter struct {
	mu     sync.Mutex
	writes []string // kind/namespace/name type resourceVersion
}

// watchWrites starts counting from now until ctx ends.
func watchWrites(ctx context.Context, t *testing.T, c kubernetes.Interface) *writeCounter {
	t.Helper()
	w := &writeCounter{}
	start := func(kind string, list func() (string, error), open func(rv string) (watch.Interface, error)) {
		rv, err := list()
		if err != nil {
			t.Fatalf("list %ss: %v", kind, err)
		}
		wi, err := open(rv)
		if err != nil {
			t.Fatalf("watch %ss: %v", kind, err)
		}
		go func() {
			defer wi.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					m, err := metaOf(ev.Object)
					if err != nil {
						continue
					}
					w.mu.Lock()
					w.writes = append(w.writes, fmt.Sprintf("%s/%s/%s %s rv=%s", kind, m.GetNamespace(), m.GetName(), ev.Type, m.GetResourceVersion()))
					w.mu.Unlock()
				}
			}
		}()
	}
	byName := fields.OneTermEqualSelector("metadata.name", ca.RootConfigMapName).String()
	start("ConfigMap", func() (string, error) {
		l, err := c.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: byName})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return c.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: rv})
	})
	start("MutatingWebhookConfiguration", func() (string, error) {
		l, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return c.AdmissionregistrationV1().MutatingWebhookConfigurations().Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	})
	start("ValidatingWebhookConfiguration", func() (string, error) {
		l, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(rv string) (watch.Interface, error) {
		return c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	})
	return w
}

func (w *writeCounter) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	return m, nil
}
