package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// buildImages builds Skiff's images into a cache shared by test runs (the
// tars are rewritten only when their inputs change).
func buildImages(t *testing.T) []string {
	t.Helper()
	dir := os.Getenv("SKIFF_IMAGES")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(cache, "skiff", "images")
	}
	tars, err := BuildImages(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tars
}
