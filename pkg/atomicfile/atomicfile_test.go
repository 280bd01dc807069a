package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file is replaced with its mode, and a failed write leaves
// the old file and no temporary one.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, c := range []struct {
		data string
		mode os.FileMode
	}{{"one", 0o600}, {"two", 0o644}} {
		if err := Write(path, []byte(c.data), c.mode); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		st, _ := os.Stat(path)
		if err != nil || string(b) != c.data || st.Mode().Perm() != c.mode {
			t.Errorf("after writing %q %v: %q %v %v", c.data, c.mode, b, st.Mode(), err)
		}
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o600); err == nil {
		t.Error("a write over a directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want f and d: %v", len(entries), entries)
	}
}
