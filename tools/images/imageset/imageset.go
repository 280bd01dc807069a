// Package imageset builds Skiff's container images from this module's
// binaries and a few of the host's Debian files, as OCI image-layout tars
// (pkg/ociimage) named as the charts render them, so a node's containerd
// can import them without a registry.
//
// The images and what runs in them:
//   - Proxy (proxyv2): /usr/local/bin/pilot-agent (entrypoint) and
//     istio-iptables, and Debian's iptables (nft and legacy, with the
//     libraries and extensions they load): the sidecar and istio-init.
//   - Pilot: istiod as /usr/local/bin/pilot-discovery (entrypoint; the chart
//     passes "discovery"), user 1337.
//   - InstallCNI: /usr/local/bin/install-cni, the plugin at
//     /opt/cni/bin/istio-cni and its API-server helper beside it
//     (istio-cni-lookup), as the istio-cni DaemonSet runs them.
//   - App: the examples, /usr/local/bin/grpc-app (entrypoint) and
//     capture-listener.
//   - Pause: a static /pause for the pod sandbox.
//   - Shell: busybox and its applets.
//
// Every image but pause has busybox (sh and its applets) and an
// /etc/passwd with root, istio-proxy (1337) and nobody.
package imageset

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/ociimage"
)

// The images' names: full references, since containerd stores what it
// imports unnormalized while the CRI resolves a pod's "skiff-mesh/x:latest"
// to "docker.io/skiff-mesh/x:latest".
const (
	Proxy      = "docker.io/skiff-mesh/proxyv2:latest"
	Pilot      = "docker.io/skiff-mesh/pilot:latest"
	InstallCNI = "docker.io/skiff-mesh/install-cni:latest"
	App        = "docker.io/skiff-mesh/app:latest"
	Shell      = "docker.io/skiff-mesh/shell:latest"
	Pause      = "docker.io/skiff-mesh/pause:latest"
	// PauseAlias is containerd 1.6's default sandbox_image, also given to
	// the pause image so a node that does not set sandbox_image still
	// finds its sandbox without a registry.
	PauseAlias = "registry.k8s.io/pause:3.6"
)

// Image is a built image.
type Image struct {
	// Name is the primary name (one of the constants above).
	Name string
	// Names are all the names it is imported under.
	Names []string
	// Path is the image-layout tar.
	Path string
	// Digest is the manifest digest, as `ctr images ls` shows it.
	Digest string
	// Cached says the tar was kept from an earlier build with the same input.
	Cached bool
}

// Build builds every image into outDir (created if need be): one
// SHORTNAME.tar per image, with SHORTNAME.tar.input recording the input
// digest so that a later Build with unchanged binaries and host files keeps
// the tar instead of writing it again. The Go binaries are installed into
// outDir/.bin by `go install` of the module holding the working directory
// (static, -trimpath, -s -w), which also skips relinking unchanged ones.
func Build(ctx context.Context, outDir string, log *slog.Logger) ([]Image, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("component", "images")
	out, err := filepath.Abs(outDir)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(out, ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	if err := installBinaries(ctx, bin, log); err != nil {
		return nil, err
	}
	h, err := probeHost()
	if err != nil {
		return nil, err
	}
	specs, err := specs(bin, h)
	if err != nil {
		return nil, err
	}
	var built []Image
	for _, s := range specs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		img, err := write(out, s, log)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.image.Names[0], err)
		}
		built = append(built, img)
	}
	return built, nil
}

// spec is one image to write, under a short file name.
type spec struct {
	short string
	image ociimage.Image
}

// write writes s unless the tar beside its input digest is already there.
func write(out string, s spec, log *slog.Logger) (Image, error) {
	img := Image{Name: s.image.Names[0], Names: s.image.Names, Path: filepath.Join(out, s.short+".tar")}
	input, err := ociimage.InputDigest(s.image)
	if err != nil {
		return Image{}, err
	}
	stamp := img.Path + ".input"
	if b, err := os.ReadFile(stamp); err == nil {
		if in, digest, ok := strings.Cut(strings.TrimSpace(string(b)), " "); ok && in == input {
			if _, err := os.Stat(img.Path); err == nil {
				img.Digest, img.Cached = digest, true
				log.Info("image unchanged", "image", img.Name, "digest", digest)
				return img, nil
			}
		}
	}
	res, err := ociimage.WriteFile(img.Path, s.image)
	if err != nil {
		return Image{}, err
	}
	img.Digest = res.Manifest.Digest
	if err := os.WriteFile(stamp, []byte(input+" "+img.Digest+"\n"), 0o644); err != nil {
		return Image{}, err
	}
	log.Info("image written", "image", img.Name, "digest", img.Digest, "path", img.Path)
	return img, nil
}
