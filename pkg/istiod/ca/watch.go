package ca

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/atomicfile"
	"github.com/skiff-mesh/skiff/pkg/kubecache"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

// debounce is how long the watcher waits after the last file-system event
// before re-reading the directory, so that a set of files written one after
// the other is read once.
const debounce = 100 * time.Millisecond

// watch re-reads the key material directory when it changes (fsnotify, with
// a poll every PollInterval in case an event is missed) until ctx ends.
// Kubernetes Secret volumes swap a "..data" symlink: watching the directory
// sees that as a create and a rename.
func (c *CA) watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", c.dir, err)
	}
	defer w.Close()
	if err := w.Add(c.dir); err != nil {
		return fmt.Errorf("watch %s: %w", c.dir, err)
	}
	poll := time.NewTicker(c.cfg.PollInterval)
	defer poll.Stop()
	timer := time.NewTimer(0)
	if !timer.Stop() {
		<-timer.C
	}
	defer timer.Stop()
	reload := func() {
		if err := c.Reload(); err != nil {
			c.log.Error("CA files changed but cannot be used; keeping the current issuer", "dir", c.dir, "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			c.log.Debug("CA directory event", "event", ev.String())
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			c.log.Warn("watching CA directory", "dir", c.dir, "err", err)
		case <-timer.C:
			reload()
		case <-poll.C:
			reload()
		}
	}
}

// publishFile writes the root bundle to RootCertPath now and whenever it
// changes, until ctx ends. A failed write is logged and retried every
// retryInterval.
func (c *CA) publishFile(ctx context.Context) error {
	path := c.cfg.RootCertPath
	var last *pki.Bundle
	for {
		ch := c.Changed()
		var retry <-chan time.Time
		if roots := c.Roots(); !roots.Equal(last) {
			if err := writeRootFile(path, roots); err != nil {
				c.log.Error("publish root certificate; will retry", "path", path, "err", err)
				retry = time.After(retryInterval)
			} else {
				c.log.Info("published root certificate", "path", path, "roots", roots.Len())
				last = roots
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		case <-retry:
		}
	}
}

// retryInterval spaces attempts to write the root file.
const retryInterval = 10 * time.Second

func writeRootFile(path string, roots *pki.Bundle) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("publish root certificate: %w", err)
	}
	if err := atomicfile.Write(path, roots.PEM(), 0o644); err != nil {
		return fmt.Errorf("publish root certificate: %w", err)
	}
	return nil
}

// watchSecret follows the istio-ca-secret Secret in Kubernetes mode and
// switches to its material when it is edited (a root rotation without a
// restart), until ctx ends. Invalid material is logged and ignored; a
// deleted Secret leaves the current issuer in place.
func (c *CA) watchSecret(ctx context.Context) error {
	inf := kubecache.Informer(c.cfg.Client, "secrets", c.cfg.Namespace, &corev1.Secret{}, kubecache.ByName(SecretName))
	onSecret := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != SecretName {
			return
		}
		if err := c.apply(secretMaterial(s)); err != nil {
			c.log.Error("secret changed but cannot be used; keeping the current issuer",
				"secret", c.cfg.Namespace+"/"+SecretName, "err", err)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onSecret,
		UpdateFunc: func(_, obj any) { onSecret(obj) },
		DeleteFunc: func(any) {
			c.log.Warn("secret deleted; keeping the current issuer", "secret", c.cfg.Namespace+"/"+SecretName)
		},
	}); err != nil {
		return fmt.Errorf("watch secret: %w", err)
	}
	inf.RunWithContext(ctx)
	return nil
}
