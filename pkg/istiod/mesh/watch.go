package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/configmap"
)

// Key is the ConfigMap key of the mesh document.
const Key = "mesh"

// ConfigMapName is the mesh ConfigMap of a control plane revision: istio,
// with "-REVISION" unless the revision is "" or "default".
func ConfigMapName(revision string) string {
	if revision == "" || revision == "default" {
		return "istio"
	}
	return "istio-" + revision
}

// Source says where the mesh document comes from, as Istio's istiod
// looks for it: File when that file exists (the chart mounts the
// ConfigMap there), else ConfigMap Namespace/Name through Client, else
// nothing (the defaults).
type Source struct {
	// File is --meshConfig (Istio's default ./etc/istio/config/mesh).
	File string
	// Client (a core/v1 REST client), Namespace and Name select the
	// ConfigMap; Client nil: none.
	Client    rest.Interface
	Namespace string
	Name      string
}

// Watcher holds the current mesh configuration and tells subscribers of
// every valid change.
type Watcher struct {
	log  *slog.Logger
	mu   sync.Mutex
	cur  *meshconfig.MeshConfig
	subs []func(*meshconfig.MeshConfig)
}

// Mesh returns the current configuration; callers must not modify it.
func (w *Watcher) Mesh() *meshconfig.MeshConfig {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// Subscribe calls f with each later change.
func (w *Watcher) Subscribe(f func(*meshconfig.MeshConfig)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, f)
}

// apply parses doc and makes it current when it parses and differs; from
// names the source in logs. A document that fails keeps the current one.
func (w *Watcher) apply(doc []byte, from string) error {
	mc, warnings, err := Parse(doc)
	for _, warn := range warnings {
		w.log.Warn(warn, "source", from)
	}
	if err != nil {
		w.log.Error("mesh config not applied; keeping the current one", "source", from, "err", err)
		return err
	}
	w.mu.Lock()
	if w.cur != nil && Equal(w.cur, mc) {
		w.mu.Unlock()
		return nil
	}
	first := w.cur == nil
	w.cur = mc
	subs := append([]func(*meshconfig.MeshConfig){}, w.subs...)
	w.mu.Unlock()
	w.log.Info("mesh config applied", "source", from, "trustDomain", mc.GetTrustDomain(), "rootNamespace", mc.GetRootNamespace(),
		"outboundTrafficPolicy", mc.GetOutboundTrafficPolicy().GetMode().String(), "enableAutoMtls", mc.GetEnableAutoMtls().GetValue())
	if !first {
		for _, f := range subs {
			f(mc)
		}
	}
	return nil
}

// Watch reads the mesh configuration from src and follows it until ctx
// ends. It returns once the first configuration is known: a first
// document that does not parse is an error (istiod should not start on a
// mesh config it cannot read), later bad edits are logged and skipped.
func Watch(ctx context.Context, src Source, log *slog.Logger) (*Watcher, error) {
	w := &Watcher{log: log.With("component", "mesh")}
	switch {
	case src.File != "" && exists(src.File):
		return w, w.followFile(ctx, src.File)
	case src.Client != nil:
		return w, w.followConfigMap(ctx, src)
	}
	w.cur = Default()
	w.log.Info("no mesh config file or ConfigMap: Istio's defaults", "file", src.File)
	return w, nil
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// followFile reads path and rereads it on every change of its directory
// (a mounted ConfigMap changes by swapping a symlink).
func (w *Watcher) followFile(ctx context.Context, path string) error {
	read := func() error {
		doc, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("mesh config %s: %w", path, err)
		}
		return w.apply(doc, path)
	}
	if err := read(); err != nil {
		return err
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("mesh config %s: watch: %w", path, err)
	}
	if err := fw.Add(filepath.Dir(path)); err != nil {
		fw.Close()
		return fmt.Errorf("mesh config %s: watch: %w", path, err)
	}
	go func() {
		defer fw.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-fw.Events:
				if !ok {
					return
				}
				if err := read(); err != nil && !errors.Is(err, os.ErrNotExist) {
					continue // logged by apply, or a read error: keep the current one
				}
			case err, ok := <-fw.Errors:
				if !ok {
					return
				}
				w.log.Warn("mesh config watch", "err", err)
			}
		}
	}()
	return nil
}

// followConfigMap follows the ConfigMap; until it exists (or once it is
// deleted) the current configuration stays, the defaults at first.
func (w *Watcher) followConfigMap(ctx context.Context, src Source) error {
	from := "configmap " + src.Namespace + "/" + src.Name
	var (
		mu       sync.Mutex
		first    = true
		firstErr error
	)
	synced := make(chan struct{})
	h := configmap.Handler{
		Changed: func(data map[string]string, rv string) {
			err := w.apply([]byte(data[Key]), from+"@"+rv)
			mu.Lock()
			if first {
				firstErr = err
			}
			mu.Unlock()
		},
		Deleted: func() { w.log.Warn("mesh ConfigMap deleted; keeping the current configuration", "source", from) },
	}
	go func() { _ = configmap.Follow(ctx, src.Client, src.Namespace, src.Name, h, w.log, synced) }()
	select {
	case <-synced:
	case <-ctx.Done():
		return ctx.Err()
	}
	mu.Lock()
	first, err := false, firstErr
	mu.Unlock()
	if err != nil {
		return err
	}
	if w.Mesh() == nil {
		w.mu.Lock()
		w.cur = Default()
		w.mu.Unlock()
		w.log.Info("mesh ConfigMap not found: Istio's defaults until it is created", "source", from)
	}
	return nil
}
