package configmap

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func TestName(t *testing.T) {
	for rev, want := range map[string]string{"": "istio-sidecar-injector", "default": "istio-sidecar-injector", "canary": "istio-sidecar-injector-canary"} {
		if got := Name(rev); got != want {
			t.Errorf("Name(%q) = %q, want %q", rev, got, want)
		}
	}
}

// TestWatchFollowsTheConfigMap edits the injector's ConfigMap on a real API
// server and waits for the injector to take each valid version, keep the
// current one through an invalid version and a deletion, and ignore other
// ConfigMaps.
func TestWatchFollowsTheConfigMap(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // runs last, after the API server stopped
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)
	const ns, name = "istio-system", "istio-sidecar-injector-canary"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := env.Client.CoreV1().ConfigMaps(ns)
	put := func(cmName, config, values string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: ns},
			Data: map[string]string{inject.ConfigKey: config, inject.ValuesKey: values}}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
			return
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(name, "", `{"revision": "one"}`)
	put("istio-sidecar-injector", "", `{"revision": "other"}`) // another revision's: not ours

	def, err := inject.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	logs := make(chan slog.Record, 100)
	in, err := inject.New(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	synced := make(chan struct{})
	go func() {
		done <- Watch(wctx, env.Client.CoreV1().RESTClient(), ns, name, in, slog.New(recorder(logs)), synced)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	revision := func(want string) {
		t.Helper()
		polltest.Until(t, "injector revision "+want, func() bool { return in.Revision() == want })
	}
	waitLog := func(level slog.Level, what string) slog.Record {
		t.Helper()
		for {
			select {
			case r := <-logs:
				if r.Level == level {
					return r
				}
			case <-time.After(polltest.Timeout):
				t.Fatalf("no %s log: %s", level, what)
			}
		}
	}

	select {
	case <-synced:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("watch ended before it synced: %v", err)
	case <-time.After(polltest.Timeout):
		t.Fatal("watch never synced")
	}
	if got := in.Revision(); got != "one" {
		t.Fatalf("synced with revision %q, want one (the ConfigMap applied before synced)", got)
	}
	put(name, "", `{"revision": "two"}`)
	revision("two")

	// Invalid: logged, the current configuration kept.
	put(name, "", `{"global": {"proxy": {"statusPort": "nope"}}, "revision": "three"}`)
	r := waitLog(slog.LevelError, "invalid configuration")
	if got := in.Revision(); got != "two" {
		t.Fatalf("after %q: revision %q, want two kept", r.Message, got)
	}
	put(name, "policy: disabled\n", `{"revision": "four"}`)
	revision("four")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}}
	if res, err := in.Inject(pod, ""); err != nil || res.Injected {
		t.Fatalf("policy: disabled not applied: injected=%v err=%v", res != nil && res.Injected, err)
	}

	// Deleted: the current configuration stays.
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLog(slog.LevelWarn, "deletion")
	if got := in.Revision(); got != "four" {
		t.Fatalf("after deletion: revision %q, want four kept", got)
	}
	// Created again: applied.
	put(name, "", `{"revision": "five"}`)
	revision("five")
}

// recorder is a slog.Handler that sends warnings and errors to its channel
// when there is room.
type recorder chan<- slog.Record

func (h recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h recorder) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r:
	default:
	}
	return nil
}

func (h recorder) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h recorder) WithGroup(string) slog.Handler { return h }
