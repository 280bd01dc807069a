package certs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skiff-mesh/skiff/pkg/pki"
)

// loadFiles reads mounted certificates: key.pem, cert-chain.pem, root-cert.pem.
func loadFiles(dir string) (*Cert, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("FILE_MOUNTED_CERTS: %w", err)
		}
		return b, nil
	}
	c := &Cert{}
	var err error
	if c.KeyPEM, err = read("key.pem"); err != nil {
		return nil, err
	}
	if c.ChainPEM, err = read("cert-chain.pem"); err != nil {
		return nil, err
	}
	if c.RootPEM, err = read("root-cert.pem"); err != nil {
		return nil, err
	}
	chain, err := pki.ParseCertificates(c.ChainPEM)
	if err != nil {
		return nil, fmt.Errorf("FILE_MOUNTED_CERTS: cert-chain.pem: %w", err)
	}
	if _, err := c.TLS(); err != nil {
		return nil, fmt.Errorf("FILE_MOUNTED_CERTS: key and chain do not match: %w", err)
	}
	c.Leaf = chain[0]
	return c, nil
}

// watchFiles serves the mounted files and reloads them when they change.
func (m *Manager) watchFiles(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(m.opts.FileDir); err != nil {
		return fmt.Errorf("FILE_MOUNTED_CERTS: watch %s: %w", m.opts.FileDir, err)
	}
	reload := func() {
		c, err := loadFiles(m.opts.FileDir)
		if err != nil {
			m.log.Warn("mounted certificates unusable", "err", err)
			return
		}
		if cur := m.Current(); cur != nil && bytes.Equal(cur.ChainPEM, c.ChainPEM) && bytes.Equal(cur.KeyPEM, c.KeyPEM) && bytes.Equal(cur.RootPEM, c.RootPEM) {
			return
		}
		m.set(c)
		m.log.Info("mounted certificates loaded", "serial", c.Leaf.SerialNumber.Text(16))
	}
	reload()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Events:
			settle = time.After(100 * time.Millisecond)
		case err := <-w.Errors:
			m.log.Warn("watch mounted certificates", "err", err)
		case <-settle:
			reload()
		}
	}
}
