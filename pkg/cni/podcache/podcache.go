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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/httpserver"
)

// Cache is the node's pods, kept by a watch.
type Cache struct {
	informer cache.SharedIndexInformer
	log      *slog.Logger
}

// New returns a cache of the pods bound to node.
func New(client kubernetes.Interface, node string, log *slog.Logger) (*Cache, error) {
	if node == "" {
		return nil, errors.New("pod cache: no node name")
	}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", corev1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", node))
	return &Cache{informer: cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{}), log: log}, nil
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
