package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Write writes img to w as an OCI image-layout tar: oci-layout, index.json
// (one entry per name, annotated with io.containerd.image.name and
// org.opencontainers.image.ref.name) and blobs/sha256/ holding the gzip
// layers, the config and the manifest. Layers are staged in temporary files
// under tmpDir ("" for the system's), since a tar header needs a blob's size
// before its content.
func Write(w io.Writer, img Image, tmpDir string) (Result, error) {
	if err := img.check(); err != nil {
		return Result{}, err
	}
	type blob struct {
		digest string
		size   int64
		data   []byte   // the blob, or
		file   *os.File // the staged blob
	}
	var blobs []blob
	defer func() {
		for _, b := range blobs {
			if b.file != nil {
				b.file.Close()
				os.Remove(b.file.Name())
			}
		}
	}()
	var res Result
	var diffIDs []string
	hist := make([]history, 0, len(img.Layers))
	for i, entries := range img.Layers {
		f, err := os.CreateTemp(tmpDir, "ociimage-layer-*")
		if err != nil {
			return Result{}, fmt.Errorf("image %s: stage layer %d: %w", img.Names[0], i, err)
		}
		blobs = append(blobs, blob{file: f})
		l, err := writeLayer(f, entries)
		if err != nil {
			return Result{}, fmt.Errorf("image %s: layer %d: %w", img.Names[0], i, err)
		}
		blobs[len(blobs)-1].digest, blobs[len(blobs)-1].size = l.Digest, l.Size
		res.Layers = append(res.Layers, Descriptor{MediaType: MediaTypeLayer, Digest: l.Digest, Size: l.Size})
		diffIDs = append(diffIDs, l.DiffID)
		hist = append(hist, history{Created: Epoch.Format("2006-01-02T15:04:05Z"), CreatedBy: "skiff ociimage"})
	}
	plat := img.platform()
	cfg := marshal(configFile{
		Created:      Epoch.Format("2006-01-02T15:04:05Z"),
		Architecture: plat.Architecture,
		OS:           plat.OS,
		Config:       img.Config,
		RootFS:       rootFS{Type: "layers", DiffIDs: diffIDs},
		History:      hist,
	})
	res.Config = Descriptor{MediaType: MediaTypeConfig, Digest: digestOf(cfg), Size: int64(len(cfg))}
	man := marshal(manifest{SchemaVersion: 2, MediaType: MediaTypeManifest, Config: res.Config, Layers: res.Layers})
	res.Manifest = Descriptor{MediaType: MediaTypeManifest, Digest: digestOf(man), Size: int64(len(man)), Platform: &plat}
	blobs = append(blobs, blob{digest: res.Config.Digest, size: res.Config.Size, data: cfg},
		blob{digest: res.Manifest.Digest, size: res.Manifest.Size, data: man})

	idx := index{SchemaVersion: 2, MediaType: MediaTypeIndex}
	for _, n := range img.Names {
		d := res.Manifest
		_, tag := splitTag(n)
		d.Annotations = map[string]string{AnnotationImageName: n, AnnotationRefName: tag}
		idx.Manifests = append(idx.Manifests, d)
	}

	tw := tar.NewWriter(w)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
			return Result{}, err
		}
	}
	order := slices.Clone(blobs)
	slices.SortStableFunc(order, func(a, b blob) int { return strings.Compare(a.digest, b.digest) })
	order = slices.CompactFunc(order, func(a, b blob) bool { return a.digest == b.digest })
	for _, b := range order {
		name := "blobs/sha256/" + strings.TrimPrefix(b.digest, "sha256:")
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o444, Size: b.size, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
			return Result{}, err
		}
		var err error
		if b.file == nil {
			_, err = tw.Write(b.data)
		} else if _, err = b.file.Seek(0, io.SeekStart); err == nil {
			_, err = io.Copy(tw, b.file)
		}
		if err != nil {
			return Result{}, fmt.Errorf("image %s: write blob %s: %w", img.Names[0], b.digest, err)
		}
	}
	small := []struct {
		name string
		data []byte
	}{
		{"index.json", marshal(idx)},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	}
	for _, f := range small {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o444, Size: int64(len(f.data)), ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
			return Result{}, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return Result{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return Result{}, fmt.Errorf("image %s: %w", img.Names[0], err)
	}
	return res, nil
}

// WriteFile writes img to path, atomically: a temporary file in the same
// directory is renamed into place once complete.
func WriteFile(path string, img Image) (Result, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(f.Name())
	res, err := Write(f, img, dir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return Result{}, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return Result{}, err
	}
	return res, nil
}

func digestOf(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }
