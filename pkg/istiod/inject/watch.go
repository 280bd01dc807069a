package inject

import (
	"bytes"
	"context"
	"os"
	"time"
)

// WatchFiles re-reads the mounted istio-sidecar-injector ConfigMap files
// every interval (Kubernetes replaces them by swapping a symlink, so
// content is compared, not events) and applies a changed configuration with
// Update. An invalid new configuration is logged and the current one kept.
// The files are read once at the start too, so a change made before the
// watch began is not missed. It returns when ctx ends.
func (in *Injector) WatchFiles(ctx context.Context, configPath, valuesPath string, interval time.Duration) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	read := func() []byte {
		c, _ := os.ReadFile(configPath)
		v, _ := os.ReadFile(valuesPath)
		return append(append(c, 0), v...)
	}
	var last []byte
	t := time.NewTicker(interval)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		cur := read()
		if bytes.Equal(cur, last) {
			continue
		}
		last = cur
		cfg, err := LoadFiles(configPath, valuesPath)
		if err == nil {
			err = in.Update(cfg)
		}
		if err != nil {
			in.log.Error("injector configuration not applied; keeping the current one", "config", configPath, "values", valuesPath, "err", err)
			continue
		}
		in.log.Info("injector configuration reloaded", "config", configPath, "values", valuesPath, "revision", in.Revision())
	}
}
