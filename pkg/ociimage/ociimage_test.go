package ociimage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/ociimage"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// sample is an image with every kind of entry, owners and special bits.
func sample() ociimage.Image {
	return ociimage.Image{
		Names:        []string{"docker.io/skiff-mesh/sample:latest", "example.com/other/sample:v1"},
		Architecture: "amd64",
		Config: ociimage.Config{
			Entrypoint: []string{"/usr/local/bin/tool"},
			Cmd:        []string{"serve"},
			Env:        []string{"PATH=/usr/local/bin:/bin"},
			User:       "1337:1337",
			WorkingDir: "/",
			Labels:     map[string]string{"b": "2", "a": "1"},
		},
		Layers: [][]ociimage.Entry{{
			ociimage.File("/usr/local/bin/tool", 0o755, []byte("#!/bin/sh\necho tool\n")),
			ociimage.HostFile("/etc/host.txt", 0, "testdata/hostfile.txt"),
			ociimage.Symlink("/bin/tool", "../usr/local/bin/tool"),
			ociimage.Dir("/etc/istio/proxy", 0o775).Own(1337, 1337),
			ociimage.Dir("/tmp", 0o777|os.ModeSticky),
		}, {
			ociimage.File("/etc/motd", 0, []byte("second layer\n")),
		}},
	}
}

func write(t *testing.T, img ociimage.Image) ([]byte, ociimage.Result) {
	t.Helper()
	var buf bytes.Buffer
	res, err := ociimage.Write(&buf, img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), res
}

// TestGoldenDigests: the same input gives the same bytes, and the digests
// are those recorded (a change means every image changes: deliberate only).
func TestGoldenDigests(t *testing.T) {
	a, res := write(t, sample())
	b, _ := write(t, sample())
	if !bytes.Equal(a, b) {
		t.Fatal("two writes of the same image differ")
	}
	var got strings.Builder
	fmt.Fprintf(&got, "manifest %s %d\nconfig %s %d\n", res.Manifest.Digest, res.Manifest.Size, res.Config.Digest, res.Config.Size)
	for _, l := range res.Layers {
		fmt.Fprintf(&got, "layer %s %d\n", l.Digest, l.Size)
	}
	golden := filepath.Join("testdata", "sample.digests")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("digests differ from %s (-want +got; -update rewrites):\n%s", golden, diff)
	}
}

// layout is an image layout read back from its tar.
type layout struct {
	files map[string][]byte
	names []string
}

func readLayout(t *testing.T, b []byte) layout {
	t.Helper()
	l := layout{files: map[string][]byte{}}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		l.names = append(l.names, h.Name)
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			l.files[h.Name] = data
		}
	}
	return l
}

func (l layout) blob(t *testing.T, d ociimage.Descriptor) []byte {
	t.Helper()
	b, ok := l.files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing", d.Digest)
	}
	if got := fmt.Sprintf("sha256:%x", sha256.Sum256(b)); got != d.Digest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: content digest %s size %d, descriptor size %d", d.Digest, got, len(b), d.Size)
	}
	return b
}

func unmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// TestLayoutParsesBack reads the tar with archive/tar and follows index ->
// manifest -> config and layers, checking digests, names and every entry.
func TestLayoutParsesBack(t *testing.T) {
	b, res := write(t, sample())
	l := readLayout(t, b)
	wantNames := []string{"blobs/", "blobs/sha256/"}
	for _, n := range l.names[2 : len(l.names)-2] {
		wantNames = append(wantNames, n)
	}
	wantNames = append(wantNames, "index.json", "oci-layout")
	if diff := cmp.Diff(wantNames, l.names); diff != "" || len(l.names) != 2+4+2 {
		t.Errorf("layout entries (-want +got):\n%s\n%v", diff, l.names)
	}
	if got := string(l.files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %s", got)
	}
	var idx struct {
		SchemaVersion int
		MediaType     string
		Manifests     []ociimage.Descriptor
	}
	unmarshal(t, l.files["index.json"], &idx)
	if idx.SchemaVersion != 2 || idx.MediaType != ociimage.MediaTypeIndex || len(idx.Manifests) != 2 {
		t.Fatalf("index.json: %s", l.files["index.json"])
	}
	for i, want := range []map[string]string{
		{ociimage.AnnotationImageName: "docker.io/skiff-mesh/sample:latest", ociimage.AnnotationRefName: "latest"},
		{ociimage.AnnotationImageName: "example.com/other/sample:v1", ociimage.AnnotationRefName: "v1"},
	} {
		m := idx.Manifests[i]
		if diff := cmp.Diff(want, m.Annotations); diff != "" {
			t.Errorf("index entry %d annotations (-want +got):\n%s", i, diff)
		}
		if m.Digest != res.Manifest.Digest || m.Platform == nil || m.Platform.OS != "linux" || m.Platform.Architecture != "amd64" {
			t.Errorf("index entry %d: %+v", i, m)
		}
	}
	var man struct {
		SchemaVersion int
		MediaType     string
		Config        ociimage.Descriptor
		Layers        []ociimage.Descriptor
	}
	unmarshal(t, l.blob(t, res.Manifest), &man)
	if man.MediaType != ociimage.MediaTypeManifest || man.Config.MediaType != ociimage.MediaTypeConfig || len(man.Layers) != 2 {
		t.Fatalf("manifest: %+v", man)
	}
	var cfg struct {
		Architecture, OS string
		Config           ociimage.Config
		RootFS           struct {
			Type    string
			DiffIDs []string `json:"diff_ids"`
		}
	}
	unmarshal(t, l.blob(t, man.Config), &cfg)
	if diff := cmp.Diff(sample().Config, cfg.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if cfg.Architecture != "amd64" || cfg.OS != "linux" || cfg.RootFS.Type != "layers" || len(cfg.RootFS.DiffIDs) != 2 {
		t.Errorf("config: %+v", cfg)
	}

	type ent struct {
		Name, Link, Data string
		Type             byte
		Mode             int64
		UID, GID         int
	}
	want := [][]ent{{
		{Name: "bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "bin/tool", Type: tar.TypeSymlink, Mode: 0o777, Link: "../usr/local/bin/tool"},
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/host.txt", Type: tar.TypeReg, Mode: 0o644, Data: "a host file\n"},
		{Name: "etc/istio/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/istio/proxy/", Type: tar.TypeDir, Mode: 0o775, UID: 1337, GID: 1337},
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
		{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/bin/tool", Type: tar.TypeReg, Mode: 0o755, Data: "#!/bin/sh\necho tool\n"},
	}, {
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/motd", Type: tar.TypeReg, Mode: 0o644, Data: "second layer\n"},
	}}
	for i, d := range man.Layers {
		if d.MediaType != ociimage.MediaTypeLayer {
			t.Errorf("layer %d media type %s", i, d.MediaType)
		}
		zr, err := gzip.NewReader(bytes.NewReader(l.blob(t, d)))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("sha256:%x", sha256.Sum256(plain)); got != cfg.RootFS.DiffIDs[i] {
			t.Errorf("layer %d diff_id %s, config says %s", i, got, cfg.RootFS.DiffIDs[i])
		}
		var got []ent
		tr := tar.NewReader(bytes.NewReader(plain))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !h.ModTime.Equal(ociimage.Epoch) || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: mtime %v owner names %q %q", h.Name, h.ModTime, h.Uname, h.Gname)
			}
			data, _ := io.ReadAll(tr)
			got = append(got, ent{h.Name, h.Linkname, string(data), h.Typeflag, h.Mode, h.Uid, h.Gid})
		}
		if diff := cmp.Diff(want[i], got); diff != "" {
			t.Errorf("layer %d entries (-want +got):\n%s", i, diff)
		}
	}
}

func TestRefused(t *testing.T) {
	ok := []ociimage.Entry{ociimage.File("/a", 0, nil)}
	for _, tc := range []struct {
		name, want string
		img        ociimage.Image
	}{
		{"no name", "no name", ociimage.Image{Layers: [][]ociimage.Entry{ok}}},
		{"short name", "full reference", ociimage.Image{Names: []string{"skiff-mesh/x:latest"}, Layers: [][]ociimage.Entry{ok}}},
		{"no tag", "want a tag", ociimage.Image{Names: []string{"docker.io/skiff-mesh/x"}, Layers: [][]ociimage.Entry{ok}}},
		{"no layers", "no layers", ociimage.Image{Names: []string{"docker.io/x/y:z"}}},
		{"relative", `path "a"`, ociimage.Image{Names: []string{"docker.io/x/y:z"}, Layers: [][]ociimage.Entry{{ociimage.File("a", 0, nil)}}}},
		{"unclean", `path "/a/../b"`, ociimage.Image{Names: []string{"docker.io/x/y:z"}, Layers: [][]ociimage.Entry{{ociimage.File("/a/../b", 0, nil)}}}},
		{"twice", "given twice", ociimage.Image{Names: []string{"docker.io/x/y:z"}, Layers: [][]ociimage.Entry{{ociimage.File("/a", 0, nil), ociimage.Dir("/a", 0)}}}},
		{"below symlink", "parent /lib is a symlink", ociimage.Image{Names: []string{"docker.io/x/y:z"}, Layers: [][]ociimage.Entry{{ociimage.Symlink("/lib", "usr/lib"), ociimage.File("/lib/x", 0, nil)}}}},
		{"missing source", "source", ociimage.Image{Names: []string{"docker.io/x/y:z"}, Layers: [][]ociimage.Entry{{ociimage.HostFile("/a", 0, "testdata/nonexistent")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ociimage.Write(io.Discard, tc.img, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestIdenticalDuplicates: the same entry twice is one entry.
func TestIdenticalDuplicates(t *testing.T) {
	img := ociimage.Image{Names: []string{"docker.io/x/y:z"}, Layers: [][]ociimage.Entry{{ociimage.Dir("/a", 0), ociimage.Dir("/a", 0o755)}}}
	if _, err := ociimage.Write(io.Discard, img, t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestInputDigest changes with any input, content of host files included,
// and not otherwise.
func TestInputDigest(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := func(mut func(*ociimage.Image)) ociimage.Image {
		i := ociimage.Image{Names: []string{"docker.io/x/y:z"}, Layers: [][]ociimage.Entry{{ociimage.HostFile("/bin/x", 0o755, src)}}}
		if mut != nil {
			mut(&i)
		}
		return i
	}
	digest := func(i ociimage.Image) string {
		t.Helper()
		d, err := ociimage.InputDigest(i)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest(img(nil))
	if again := digest(img(nil)); again != base {
		t.Fatalf("same input, digests %s and %s", base, again)
	}
	for name, mut := range map[string]func(*ociimage.Image){
		"name":  func(i *ociimage.Image) { i.Names = []string{"docker.io/x/y:w"} },
		"cmd":   func(i *ociimage.Image) { i.Config.Cmd = []string{"x"} },
		"mode":  func(i *ociimage.Image) { i.Layers[0][0].Mode = 0o700 },
		"owner": func(i *ociimage.Image) { i.Layers[0][0].UID = 1 },
		"arch":  func(i *ociimage.Image) { i.Architecture = "arm64" },
		"layer": func(i *ociimage.Image) { i.Layers = append(i.Layers, []ociimage.Entry{ociimage.Dir("/d", 0)}) },
	} {
		if digest(img(mut)) == base {
			t.Errorf("changing the %s kept the input digest", name)
		}
	}
	if err := os.WriteFile(src, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if digest(img(nil)) == base {
		t.Error("changing a host file's content kept the input digest")
	}
}
