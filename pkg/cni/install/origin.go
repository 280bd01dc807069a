package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skiff-mesh/skiff/pkg/atomicfile"
)

// originName is the file in the agent run dir that remembers the CNI
// configuration as the installer found it, so that uninstalling gives it
// back byte for byte, also after the installer restarted. Insert and Remove
// keep a conflist's bytes by themselves; the record matters when a .conf
// was replaced by its .conflist.
const originName = "istio-cni-conf-origin.json"

// origin is the record: the file found and its bytes without our entry,
// and the conflist written in its place, as written but without our entry.
type origin struct {
	// Path, Data and Mode are the file as found.
	Path string      `json:"path"`
	Data []byte      `json:"data"`
	Mode os.FileMode `json:"mode"`
	// Conflist is the file we write; Base is it as we last wrote it,
	// without our entry.
	Conflist string `json:"conflist"`
	Base     []byte `json:"base"`
}

func (in *Installer) originPath() string { return filepath.Join(in.cfg.AgentRunDir, originName) }

// loadOrigin returns the record, or false when there is none (or it is unreadable).
func (in *Installer) loadOrigin() (origin, bool) {
	var o origin
	b, err := os.ReadFile(in.originPath())
	if err != nil {
		return o, false
	}
	if err := json.Unmarshal(b, &o); err != nil {
		in.log.Warn("ignoring an unreadable record of the original CNI configuration", "path", in.originPath(), "err", err)
		return o, false
	}
	return o, o.Conflist != ""
}

// recordOrigin remembers what the installer is about to replace: path with
// data, by conflist dst with out. A record of an earlier write to dst that
// nobody changed since (but for our entry) keeps its original.
func (in *Installer) recordOrigin(path string, data []byte, mode os.FileMode, dst string, out []byte) error {
	found, _, err := Remove(data)
	if err != nil {
		return err
	}
	base, _, err := Remove(out)
	if err != nil {
		return err
	}
	o := origin{Path: path, Data: found, Mode: mode, Conflist: dst, Base: base}
	if old, ok := in.loadOrigin(); ok && old.Conflist == dst && bytes.Equal(old.Base, found) {
		o.Path, o.Data, o.Mode = old.Path, old.Data, old.Mode
	}
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("record the original CNI configuration: %w", err)
	}
	if err := os.MkdirAll(in.cfg.AgentRunDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", in.cfg.AgentRunDir, err)
	}
	return atomicfile.Write(in.originPath(), b, 0o600)
}

// unchain removes our entry from the conflist at path. When the file is
// the one recorded and nobody changed it since our last write but for our
// entry, the file as found comes back instead, byte for byte and under its
// own name (a .conf replaced by a .conflist is restored).
func (in *Installer) unchain(path string, o origin, recorded bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	out, had, err := Remove(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if recorded && o.Conflist == path && bytes.Equal(out, o.Base) {
		if o.Path == path {
			if bytes.Equal(data, o.Data) {
				return nil
			}
			return atomicfile.Write(path, o.Data, o.Mode)
		}
		// A .conf we replaced: back under its name unless someone made a new one.
		if _, err := os.Stat(o.Path); errors.Is(err, os.ErrNotExist) {
			if err := atomicfile.Write(o.Path, o.Data, o.Mode); err != nil {
				return err
			}
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("remove %s after restoring %s: %w", path, o.Path, err)
			}
			return nil
		}
	}
	if !had {
		return nil
	}
	return atomicfile.Write(path, out, fileMode(path))
}

// fileMode is path's permission bits, 0644 when it cannot be read.
func fileMode(path string) os.FileMode {
	st, err := os.Stat(path)
	if err != nil {
		return 0o644
	}
	return st.Mode().Perm()
}
