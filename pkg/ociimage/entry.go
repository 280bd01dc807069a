package ociimage

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Sticky is the sticky bit for an Entry's Mode (a /tmp is 0o777|Sticky).
const Sticky = fs.ModeSticky

// Type is the kind of an Entry.
type Type int

// The entry types.
const (
	TypeFile Type = iota
	TypeDir
	TypeSymlink
)

// String names the type as error messages show it.
func (t Type) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Entry is one file system object in a layer.
type Entry struct {
	// Path is the absolute, clean path in the image, e.g. "/usr/local/bin/x".
	Path string
	// Type says what Path is.
	Type Type
	// Mode holds the permission bits (and setuid, setgid, sticky); zero means
	// 0644 for a file and 0755 for a directory. Symlinks are always 0777.
	Mode fs.FileMode
	// UID and GID own the entry.
	UID, GID int
	// Data is a file's content, when Source is empty.
	Data []byte
	// Source is a host file whose content the file has, read when the image
	// is written (a symlink there is followed).
	Source string
	// Target is a symlink's target, absolute or relative to its directory.
	Target string
}

// File is a file with the given content.
func File(p string, mode fs.FileMode, data []byte) Entry {
	return Entry{Path: p, Type: TypeFile, Mode: mode, Data: data}
}

// HostFile is a file whose content is read from the host file src.
func HostFile(p string, mode fs.FileMode, src string) Entry {
	return Entry{Path: p, Type: TypeFile, Mode: mode, Source: src}
}

// Dir is a directory.
func Dir(p string, mode fs.FileMode) Entry {
	return Entry{Path: p, Type: TypeDir, Mode: mode}
}

// Symlink is a symbolic link at p pointing to target.
func Symlink(p, target string) Entry {
	return Entry{Path: p, Type: TypeSymlink, Target: target}
}

// Own returns e owned by uid and gid.
func (e Entry) Own(uid, gid int) Entry {
	e.UID, e.GID = uid, gid
	return e
}

// perm is the mode the entry is written with.
func (e Entry) perm() fs.FileMode {
	const bits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	switch {
	case e.Type == TypeSymlink:
		return fs.ModePerm
	case e.Mode&bits != 0:
		return e.Mode & bits
	case e.Type == TypeDir:
		return 0o755
	}
	return 0o644
}

// normalize validates entries and returns them sorted by path, with every
// missing parent directory added (0755, root). It refuses relative or
// unclean paths, duplicates that differ, and entries below a symlink
// (a runtime would resolve the link and write outside the intended path).
func normalize(entries []Entry) ([]Entry, error) {
	byPath := make(map[string]Entry, len(entries))
	for _, e := range entries {
		if err := e.check(); err != nil {
			return nil, err
		}
		if old, ok := byPath[e.Path]; ok {
			if !sameEntry(old, e) {
				return nil, fmt.Errorf("path %s: given twice (%s and %s)", e.Path, old.Type, e.Type)
			}
			continue
		}
		byPath[e.Path] = e
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			parent, ok := byPath[d]
			if !ok {
				byPath[d] = Dir(d, 0o755)
				continue
			}
			if parent.Type != TypeDir {
				return nil, fmt.Errorf("path %s: parent %s is a %s, not a dir", p, d, parent.Type)
			}
		}
	}
	out := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (e Entry) check() error {
	if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == "/" {
		return fmt.Errorf("path %q: want an absolute, clean path below /", e.Path)
	}
	switch e.Type {
	case TypeFile:
		if e.Source != "" && e.Data != nil {
			return fmt.Errorf("path %s: both Data and Source set", e.Path)
		}
		if e.Target != "" {
			return fmt.Errorf("path %s: a file has no Target", e.Path)
		}
	case TypeDir:
		if e.Data != nil || e.Source != "" || e.Target != "" {
			return fmt.Errorf("path %s: a dir has no Data, Source or Target", e.Path)
		}
	case TypeSymlink:
		if e.Target == "" {
			return fmt.Errorf("path %s: symlink without Target", e.Path)
		}
		if e.Data != nil || e.Source != "" {
			return fmt.Errorf("path %s: a symlink has no Data or Source", e.Path)
		}
	default:
		return fmt.Errorf("path %s: unknown type %v", e.Path, e.Type)
	}
	if e.UID < 0 || e.GID < 0 {
		return fmt.Errorf("path %s: negative owner %d:%d", e.Path, e.UID, e.GID)
	}
	return nil
}

func sameEntry(a, b Entry) bool {
	return a.Type == b.Type && a.perm() == b.perm() && a.UID == b.UID && a.GID == b.GID &&
		a.Source == b.Source && a.Target == b.Target && string(a.Data) == string(b.Data)
}
