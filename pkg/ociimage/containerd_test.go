package ociimage_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/ociimage"
	"github.com/skiff-mesh/skiff/pkg/ociimage/containerdtest"
)

// TestContainerdImportsAndRuns imports a written image into a real
// containerd, finds it under its names, and runs it with runc: the
// entrypoint, command, user and working directory of the config apply, and
// files keep their owners and modes.
func TestContainerdImportsAndRuns(t *testing.T) {
	const busybox = "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		t.Fatalf("%s (busybox-static; make deps installs it): %v", busybox, err)
	}
	c := containerdtest.Start(t)
	name := "docker.io/skiff-mesh/ociimage-test:latest"
	img := ociimage.Image{
		Names: []string{name, "example.com/ociimage/alias:v1"},
		Config: ociimage.Config{
			Entrypoint: []string{"/bin/sh", "-c"},
			Cmd:        []string{"id -u; id -g; pwd; cat /etc/greeting"},
			Env:        []string{"PATH=/bin"},
			User:       "1337:1338",
			WorkingDir: "/data",
		},
		Layers: [][]ociimage.Entry{{
			ociimage.HostFile("/bin/busybox", 0o755, busybox),
			ociimage.Symlink("/bin/sh", "busybox"),
			ociimage.Symlink("/bin/stat", "busybox"),
			ociimage.Symlink("/bin/id", "busybox"),
			ociimage.Symlink("/bin/cat", "busybox"),
			ociimage.Dir("/data", 0o750).Own(1337, 1338),
		}, {
			ociimage.File("/etc/greeting", 0o640, []byte("hello\n")).Own(0, 1338),
		}},
	}
	path := filepath.Join(t.TempDir(), "image.tar")
	res, err := ociimage.WriteFile(path, img)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Import(ctx, path); err != nil {
		t.Fatal(err)
	}
	names, err := c.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range img.Names {
		if !slices.Contains(names, n) {
			t.Errorf("image %s not listed after import; ctr lists %q", n, names)
		}
	}
	out, err := c.Ctr(ctx, "images", "list", "name=="+name)
	if err != nil || !contains(out, res.Manifest.Digest) {
		t.Errorf("ctr images list does not show manifest %s: %v\n%s", res.Manifest.Digest, err, out)
	}

	for _, tc := range []struct {
		name string
		run  containerdtest.Run
		want string
	}{
		{"image config", containerdtest.Run{Image: name}, "1337\n1338\n/data\nhello\n"},
		{"owners and modes", containerdtest.Run{Image: name, Args: []string{"stat", "-c", "%n %u:%g %a %F", "/data", "/etc/greeting", "/bin/busybox"}},
			"/data 1337:1338 750 directory\n/etc/greeting 0:1338 640 regular file\n/bin/busybox 0:0 755 regular file\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Run(ctx, tc.run)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("output %q, want %q", got, tc.want)
			}
		})
	}
}

func contains(s, sub string) bool { return sub != "" && strings.Contains(s, sub) }
