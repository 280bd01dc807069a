package ociimage

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// format changes whenever Write's output for the same input would; it is
// part of InputDigest.
const format = "skiff-ociimage/1"

// InputDigest is a digest of everything Write reads to write img: names,
// platform, configuration and each entry, host sources by their content.
// Write is deterministic, so equal input digests mean equal image files,
// and a caller can keep a file written earlier instead of writing it again.
func InputDigest(img Image) (string, error) {
	if err := img.check(); err != nil {
		return "", err
	}
	h := sha256.New()
	enc := json.NewEncoder(h)
	type entry struct {
		Path, Target, Content string
		Type                  Type
		Mode                  uint32
		UID, GID              int
	}
	head := struct {
		Format   string
		Names    []string
		Platform Platform
		Config   Config
	}{format, img.Names, img.platform(), img.Config}
	if err := enc.Encode(head); err != nil {
		return "", err
	}
	for i, layer := range img.Layers {
		sorted, err := normalize(layer)
		if err != nil {
			return "", fmt.Errorf("image %s: layer %d: %w", img.Names[0], i, err)
		}
		if err := enc.Encode(fmt.Sprintf("layer %d", i)); err != nil {
			return "", err
		}
		for _, e := range sorted {
			c := ""
			switch {
			case e.Source != "":
				c, err = fileDigest(e.Source)
				if err != nil {
					return "", fmt.Errorf("path %s: source: %w", e.Path, err)
				}
			case e.Type == TypeFile:
				c = digestOf(e.Data)
			}
			if err := enc.Encode(entry{e.Path, e.Target, c, e.Type, uint32(e.perm()), e.UID, e.GID}); err != nil {
				return "", err
			}
		}
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil)), nil
}

func fileDigest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil)), nil
}
