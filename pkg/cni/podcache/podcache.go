// Package podcache is the CNI node agent's cache of its node's pods: an
// informer over the pods bound to the node, served on a Unix socket as the
// API server's pod GET (/api/v1/namespaces/NS/pods/NAME), so the plugin,
// which runs once per pod, reads its pod without a TLS handshake with the
// API server. Until the informer has synced, and for a pod it does not
// hold, it answers 503 or 404 and the plugin asks the API server.
package podcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/httpserver"
)

// Cache is the node's pods, kept by a watch.
type Cache struct {
	informer cache.SharedIndexInformer
	log      *slog.Logger
}

// New returns a cache of the pods bound to node.
func New(client rest.Interface, node string, log *slog.Logger) (*Cache, error) {
	if node == "" {
		return nil, errors.New("pod cache: no node name")
	}
	lw := cache.NewListWatchFromClient(client, "pods", corev1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", node))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if err := inf.SetTransform(trim); err != nil {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	return &Cache{informer: inf, log: log}, nil
}

// trim keeps of a pod what the plugin reads (cni.Pod), so the cache holds
// and encodes a few hundred bytes per pod rather than the whole object with
// its status and managed fields.
func trim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a deleted-final-state tombstone
	}
	t := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
		ResourceVersion: p.ResourceVersion, Labels: p.Labels, Annotations: p.Annotations}}
	t.Spec.NodeName = p.Spec.NodeName
	t.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	t.Spec.Containers = trimContainers(p.Spec.Containers)
	return t, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Args: c.Args}
		for _, e := range c.Env {
			out[i].Env = append(out[i].Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
		if sc := c.SecurityContext; sc != nil {
			out[i].SecurityContext = &corev1.SecurityContext{RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup}
		}
	}
	return out
}

// ServeHTTP answers GET /api/v1/namespaces/NS/pods/NAME from the cache.
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/")
	ns, name, ok2 := strings.Cut(rest, "/pods/")
	if r.Method != http.MethodGet || !ok || !ok2 || ns == "" || name == "" || strings.Contains(name, "/") {
		http.Error(w, "only GET /api/v1/namespaces/NS/pods/NAME", http.StatusBadRequest)
		return
	}
	if !c.informer.HasSynced() {
		http.Error(w, "pod cache not synced yet", http.StatusServiceUnavailable)
		return
	}
	obj, exists, err := c.informer.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !exists {
		http.Error(w, "pod "+ns+"/"+name+" not in the node's cache", http.StatusNotFound)
		return
	}
	b, err := json.Marshal(obj.(*corev1.Pod))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// Serve runs the watch and serves the socket at path (replacing a stale
// one, mode 0600: the plugin runs as root) until ctx ends, then removes it.
func (c *Cache) Serve(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("pod cache: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pod cache: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("pod cache: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("pod cache: %w", err)
	}
	c.log.Info("serving the node's pods", "socket", path)
	go c.informer.RunWithContext(ctx)
	defer os.Remove(path)
	return httpserver.Serve(ctx, &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}, ln, time.Second)
}
