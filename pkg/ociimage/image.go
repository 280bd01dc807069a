package ociimage

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
)

// The media types and annotations an image layout uses.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationImageName is the full reference containerd names an
	// imported image by.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is the OCI layout's reference: the tag.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Image is what Write turns into an image layout.
type Image struct {
	// Names are full references, e.g. "docker.io/skiff-mesh/proxyv2:latest":
	// containerd does not normalize names on import, so short forms would
	// not match what a pod spec's "skiff-mesh/proxyv2:latest" resolves to.
	// The first is the primary name; each becomes an index entry.
	Names []string
	// Architecture and OS default to runtime.GOARCH and "linux".
	Architecture, OS string
	// Config is how a container of the image runs.
	Config Config
	// Layers are applied in order; each is a list of entries.
	Layers [][]Entry
}

// Config is the runtime part of the image configuration.
type Config struct {
	// User is "uid[:gid]" or a name from the image's /etc/passwd.
	User       string            `json:"User,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	StopSignal string            `json:"StopSignal,omitempty"`
}

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Platform is the os and architecture of an image.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Result describes a written image.
type Result struct {
	// Manifest is the image's manifest: its digest is the image digest
	// `ctr images ls` shows.
	Manifest Descriptor
	Config   Descriptor
	Layers   []Descriptor
}

type configFile struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       Config    `json:"config"`
	RootFS       rootFS    `json:"rootfs"`
	History      []history `json:"history"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

func (img Image) platform() Platform {
	p := Platform{Architecture: img.Architecture, OS: img.OS}
	if p.Architecture == "" {
		p.Architecture = runtime.GOARCH
	}
	if p.OS == "" {
		p.OS = "linux"
	}
	return p
}

func (img Image) check() error {
	if len(img.Names) == 0 {
		return fmt.Errorf("image has no name")
	}
	for _, n := range img.Names {
		if err := checkName(n); err != nil {
			return err
		}
	}
	if len(img.Layers) == 0 {
		return fmt.Errorf("image %s: no layers", img.Names[0])
	}
	return nil
}

// checkName wants a full reference: a registry host, a path and a tag.
func checkName(n string) error {
	host, rest, ok := strings.Cut(n, "/")
	if !ok || !strings.ContainsAny(host, ".:") && host != "localhost" {
		return fmt.Errorf("image name %q: want a full reference with a registry, e.g. docker.io/%s", n, n)
	}
	if _, tag := splitTag(rest); tag == "" {
		return fmt.Errorf("image name %q: want a tag, e.g. %s:latest", n, n)
	}
	if strings.ToLower(rest) != rest || strings.ContainsAny(n, " \t\n@") {
		return fmt.Errorf("image name %q: want a lowercase path and no digest", n)
	}
	return nil
}

// splitTag splits "path:tag" (a colon after the last slash).
func splitTag(ref string) (string, string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}

// marshal is json.Marshal for the blobs: maps are sorted, so the output is
// stable.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ociimage: marshal %T: %v", v, err))
	}
	return b
}
