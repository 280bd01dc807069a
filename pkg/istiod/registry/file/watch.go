package file

import (
	"context"
	"fmt"
	"github.com/fsnotify/fsnotify"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// settle is how long the watcher waits after a file event for more events
// before reading: editors write a file in several steps.
const settle = 10 * time.Millisecond

// Run loads the directory (unless Load was called) and watches it until ctx
// ends, calling changed after each change that altered the objects.
func (r *Registry) Run(ctx context.Context, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config dir: %w", err)
	}
	defer w.Close()
	if err := addTree(w, r.dir); err != nil {
		return err
	}
	if !r.Synced() {
		if err := r.Load(); err != nil {
			return err
		}
		changed()
	} else if r.rescan() {
		// Files changed between Load and the watch starting.
		changed()
	}
	pending := map[string]bool{}
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-w.Errors:
			r.log.Warn("file watch error", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := statDir(ev.Name); err == nil && fi {
					if err := addTree(w, ev.Name); err != nil {
						r.log.Warn("watch new directory", "err", err)
					}
					pending[""] = true // rescan everything
				}
			}
			pending[ev.Name] = true
			if timer == nil {
				timer = time.After(settle)
			}
		case <-timer:
			timer = nil
			if r.apply(pending) {
				changed()
			}
			pending = map[string]bool{}
		}
	}
}

// apply re-reads the changed paths; it reports whether objects changed.
func (r *Registry) apply(paths map[string]bool) bool {
	if paths[""] {
		return r.rescan()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	any := false
	for p := range paths {
		if isConfigFile(p) && r.readLocked(p) {
			any = true
		}
	}
	if any {
		r.rebuildLocked()
	}
	return any
}

// rescan re-reads the whole tree, dropping files that are gone.
func (r *Registry) rescan() bool {
	var paths []string
	_ = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isConfigFile(p) {
			paths = append(paths, p)
		}
		return nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	any := false
	live := map[string]bool{}
	for _, p := range paths {
		live[p] = true
		if r.readLocked(p) {
			any = true
		}
	}
	for p := range r.files {
		if !live[p] {
			r.dropFile(p)
			any = true
		}
	}
	if any {
		r.rebuildLocked()
	}
	return any
}

func addTree(w interface{ Add(string) error }, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if err := w.Add(p); err != nil {
				return fmt.Errorf("watch %s: %w", p, err)
			}
		}
		return nil
	})
}

func statDir(p string) (bool, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}
