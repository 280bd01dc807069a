package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// saveProfiles writes istiod's heap profile (after a GC), its goroutines and
// its runtime memory statistics into dir, named after the client count, so a
// reading at rest can be broken down with go tool pprof.
func saveProfiles(ctx context.Context, base, dir string, clients int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, path := range map[string]string{
		"heap.pb.gz":     "/debug/pprof/heap?gc=1",
		"goroutine.txt":  "/debug/pprof/goroutine?debug=1",
		"heap-stats.txt": "/debug/pprof/heap?debug=1",
	} {
		if err := fetchTo(ctx, base+path, filepath.Join(dir, fmt.Sprintf("%d-%s", clients, name))); err != nil {
			return fmt.Errorf("istiod profile %s: %w", path, err)
		}
	}
	return nil
}

func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
