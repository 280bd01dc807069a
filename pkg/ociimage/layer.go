package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Epoch is the modification time of every entry: fixed, so that the digest
// depends on content only.
var Epoch = time.Unix(0, 0).UTC()

// layerBlob is a written layer: its gzip blob's digest and size, and the
// digest of the uncompressed tar (the config's diff_id).
type layerBlob struct {
	Digest, DiffID string
	Size           int64
}

// writeLayer writes entries as a gzip-compressed tar to w.
func writeLayer(w io.Writer, entries []Entry) (layerBlob, error) {
	sorted, err := normalize(entries)
	if err != nil {
		return layerBlob{}, err
	}
	compressed := &digester{h: sha256.New(), w: w}
	// BestSpeed: these layers are imported locally, and most of their bytes
	// are Go binaries that compress poorly at any level.
	zw, err := gzip.NewWriterLevel(compressed, gzip.BestSpeed)
	if err != nil {
		return layerBlob{}, err
	}
	plain := &digester{h: sha256.New(), w: zw}
	tw := tar.NewWriter(plain)
	for _, e := range sorted {
		if err := writeEntry(tw, e); err != nil {
			return layerBlob{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return layerBlob{}, fmt.Errorf("layer tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return layerBlob{}, fmt.Errorf("layer gzip: %w", err)
	}
	return layerBlob{Digest: compressed.digest(), DiffID: plain.digest(), Size: compressed.n}, nil
}

func writeEntry(tw *tar.Writer, e Entry) error {
	hdr := &tar.Header{
		Name:    strings.TrimPrefix(e.Path, "/"),
		Mode:    tarMode(e.perm()),
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: Epoch,
		Format:  tar.FormatPAX,
	}
	var src *os.File
	switch e.Type {
	case TypeDir:
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
	case TypeSymlink:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
	case TypeFile:
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Data))
		if e.Source != "" {
			f, err := os.Open(e.Source)
			if err != nil {
				return fmt.Errorf("path %s: source: %w", e.Path, err)
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return fmt.Errorf("path %s: source: %w", e.Path, err)
			}
			if !st.Mode().IsRegular() {
				return fmt.Errorf("path %s: source %s is not a regular file", e.Path, e.Source)
			}
			src, hdr.Size = f, st.Size()
		}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("path %s: %w", e.Path, err)
	}
	if e.Type != TypeFile {
		return nil
	}
	if src == nil {
		_, err := tw.Write(e.Data)
		return err
	}
	if n, err := io.Copy(tw, src); err != nil {
		return fmt.Errorf("path %s: copy %s after %d bytes: %w", e.Path, e.Source, n, err)
	}
	return nil
}

// tarMode converts permission and special bits to tar's mode field.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m & fs.ModePerm)
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// digester hashes and counts what passes through it.
type digester struct {
	h hash.Hash
	w io.Writer
	n int64
}

func (d *digester) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	d.h.Write(p[:n])
	d.n += int64(n)
	return n, err
}

func (d *digester) digest() string { return fmt.Sprintf("sha256:%x", d.h.Sum(nil)) }
