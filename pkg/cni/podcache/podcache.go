// Package podcache is the CNI node agent's cache of its node's pods: an
// informer over the pods bound to the node, published as one file per pod
// in cni_agent_run_dir/pods (cni.PodFile), so the plugin, which runs once
// per pod, reads its pod with one open and read: no TLS handshake with the
// API server and no round trip to another process. For a pod it has no
// file of (not listed yet, or not on this node) the plugin asks the API
// server.
package podcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/atomicfile"
	"github.com/skiff-mesh/skiff/pkg/cni"
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

// Publish runs the watch and keeps one file per pod of the node in dir
// (cni.PodFile: the trimmed pod as JSON, mode 0600, written through a
// temporary file and a rename, so the plugin reads a whole pod or none),
// until ctx ends; then it removes them.
//
// It first takes an exclusive flock on dir's cni.PodCacheOwner, and holds
// it until the files are gone: the plugin trusts the files only while the
// lock is held, so files left by an install-cni that died are not used.
// While another install-cni holds the lock (a rolling update), it waits.
// Then it removes whatever files are there, so none outlives its pod
// across restarts; until the first list is in, the plugin finds no file
// and asks the API server.
func (c *Cache) Publish(ctx context.Context, dir string) error {
	owner, err := c.own(ctx, dir)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the lock
		}
		return fmt.Errorf("pod cache: %w", err)
	}
	defer owner.Close()
	// The files go before the lock; the owner file stays, so that a
	// successor waiting for the lock locks the file that is there.
	defer clearExcept(dir, cni.PodCacheOwner)
	if err := clearExcept(dir, cni.PodCacheOwner); err != nil {
		return fmt.Errorf("pod cache: %w", err)
	}
	w := &writer{dir: dir, log: c.log}
	reg, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.write(obj) },
		UpdateFunc: func(old, obj any) { w.update(old, obj) },
		DeleteFunc: func(obj any) { w.remove(obj) },
	})
	if err != nil {
		return fmt.Errorf("pod cache: %w", err)
	}
	defer func() { _ = c.informer.RemoveEventHandler(reg) }()
	c.log.Info("publishing the node's pods", "dir", dir)
	c.informer.RunWithContext(ctx)
	return nil
}

// ownerRetry is how often own tries again for a lock another install-cni
// holds.
const ownerRetry = time.Second

// own returns dir's owner file with an exclusive flock on it, made if
// need be. It waits while another process holds the lock, and tries again
// when the file it locked was removed meanwhile (by hand: Publish leaves it
// in place).
func (c *Cache) own(ctx context.Context, dir string) (*os.File, error) {
	path := filepath.Join(dir, cni.PodCacheOwner)
	for waited := false; ; {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			held, herr := f.Stat()
			named, nerr := os.Stat(path)
			if herr == nil && nerr == nil && os.SameFile(held, named) {
				return f, nil
			}
			f.Close() // locked a file that is gone: lock the one there now
			continue
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waited {
			waited = true
			c.log.Info("another process keeps the pod cache; waiting for it to stop", "lock", path)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(ownerRetry):
		}
	}
}

// clearExcept removes every entry of dir but keep.
func clearExcept(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// writer writes and removes the pods' files; the informer calls it from
// one goroutine.
type writer struct {
	dir string
	log *slog.Logger
}

// update rewrites the pod's file when what the plugin reads changed: the
// trimmed pod without its resource version, which every status change
// bumps.
func (w *writer) update(old, obj any) {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	ob, err1 := encode(o)
	nb, err2 := encode(n)
	if err1 == nil && err2 == nil && bytes.Equal(ob, nb) {
		return
	}
	w.write(obj)
}

// encode is the pod's file: the trimmed pod without its resource version.
func encode(p *corev1.Pod) ([]byte, error) {
	q := *p
	q.ResourceVersion = ""
	return json.Marshal(&q)
}

func (w *writer) write(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	path := cni.PodFile(w.dir, p.Namespace, p.Name)
	if path == "" {
		w.log.Warn("pod name cannot be a file; the plugin will ask the API server", "pod", p.Namespace+"/"+p.Name)
		return
	}
	b, err := encode(p)
	if err == nil {
		err = atomicfile.Write(path, b, 0o600)
	}
	if err != nil {
		w.log.Warn("pod not published; the plugin will ask the API server", "pod", p.Namespace+"/"+p.Name, "err", err)
	}
}

func (w *writer) remove(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if path := cni.PodFile(w.dir, p.Namespace, p.Name); path != "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.log.Warn("pod file not removed", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
}
