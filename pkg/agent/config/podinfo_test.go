package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDownwardAPI(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     map[string]string
		err      string
	}{
		{"kubelet's format", "app=\"reviews\"\nversion=\"v1\"\nsecurity.istio.io/tlsMode=\"istio\"\n", map[string]string{"app": "reviews", "version": "v1", "security.istio.io/tlsMode": "istio"}, ""},
		{"escapes and = in values", `note="a \"b\" = c"`, map[string]string{"note": `a "b" = c`}, ""},
		{"empty", "", map[string]string{}, ""},
		{"lines without =", "junk\n\napp=\"x\"", map[string]string{"app": "x"}, ""},
		{"unquoted", "app=reviews", nil, `line 1: value of "app": reviews is not a quoted string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseDownwardAPI(c.in)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestReadPodInfo(t *testing.T) {
	dir := t.TempDir()
	c := &Config{WorkDir: dir, Labels: map[string]string{"app": "env", "static": "yes"}}
	if err := c.ReadPodInfo(); err != nil || c.Labels["app"] != "env" {
		t.Fatalf("no file: %v %v", err, c.Labels)
	}
	p := filepath.Join(dir, PodLabelsPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("app=\"reviews\"\npod-template-hash=\"abc\"\nversion=\"v2\""), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadPodInfo(); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"app": "reviews", "static": "yes", "version": "v2"}, c.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if err := os.WriteFile(filepath.Join(dir, PodAnnotationsPath), []byte("sidecar.istio.io/status=\"{}\""), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadPodInfo(); err != nil || c.Annotations["sidecar.istio.io/status"] != "{}" {
		t.Errorf("annotations: %v %v", c.Annotations, err)
	}
	if err := os.WriteFile(p, []byte("app=reviews"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := c.Labels
	if err := c.ReadPodInfo(); err == nil || !strings.Contains(err.Error(), PodLabelsPath) {
		t.Errorf("bad file: %v, want an error naming it", err)
	}
	if d := cmp.Diff(before, c.Labels); d != "" {
		t.Errorf("a bad file changed the labels: %s", d)
	}
}

func FuzzParseDownwardAPI(f *testing.F) {
	f.Add("app=\"reviews\"\nversion=\"v1\"")
	f.Add(`x="\u00e9\n"`)
	f.Add("a=\"\nb=")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseDownwardAPI(s)
		if err == nil && m == nil {
			t.Fatal("nil map without an error")
		}
	})
}
