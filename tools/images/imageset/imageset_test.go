package imageset_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/ociimage/containerdtest"
	"github.com/skiff-mesh/skiff/tools/images/imageset"
)

// TestImagesRunInContainerd builds every image, builds again (all kept
// from the first build), imports each into a real containerd under its
// names, and runs what the cluster runs in them: the shell, pilot-agent,
// the dynamically linked iptables, and istio-iptables as the injected
// istio-init runs it (root with NET_ADMIN and NET_RAW, not privileged, in
// the container's own network namespace).
func TestImagesRunInContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	imgs, err := imageset.Build(ctx, out, log)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, img := range imgs {
		names = append(names, img.Name)
	}
	want := []string{imageset.Proxy, imageset.Pilot, imageset.InstallCNI, imageset.App, imageset.Pause, imageset.Shell}
	if !slices.Equal(names, want) {
		t.Fatalf("built %q, want %q", names, want)
	}
	again, err := imageset.Build(ctx, out, log)
	if err != nil {
		t.Fatal(err)
	}
	for i, img := range again {
		if !img.Cached || img.Digest != imgs[i].Digest || img.Path != imgs[i].Path {
			t.Errorf("second build of %s: %+v, want the first's %+v kept", img.Name, img, imgs[i])
		}
	}

	c := containerdtest.Start(t)
	for _, img := range imgs {
		if err := c.Import(ctx, img.Path); err != nil {
			t.Fatalf("import %s: %v", img.Name, err)
		}
	}
	listed, err := c.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(want, imageset.PauseAlias) {
		if !slices.Contains(listed, n) {
			t.Errorf("%s not listed after import: %q", n, listed)
		}
	}

	for _, tc := range []struct {
		name string
		run  containerdtest.Run
		want []string // substrings of the output
	}{
		{"shell", containerdtest.Run{Image: imageset.Shell, Args: []string{"sh", "-c", "echo ok; id istio-proxy"}}, []string{"ok\nuid=1337(istio-proxy) gid=1337(istio-proxy)"}},
		{"pilot-agent", containerdtest.Run{Image: imageset.Proxy, Args: []string{"pilot-agent", "version"}}, nil},
		{"iptables-restore", containerdtest.Run{Image: imageset.Proxy, Args: []string{"iptables-restore", "--version"}}, []string{"nf_tables"}},
		{"ip6tables-legacy-restore", containerdtest.Run{Image: imageset.Proxy, Args: []string{"ip6tables-legacy-restore", "--version"}}, []string{"legacy"}},
		{"istio-init", containerdtest.Run{Image: imageset.Proxy, CapAdd: []string{"CAP_NET_ADMIN", "CAP_NET_RAW"}, Args: []string{"sh", "-c",
			"pilot-agent istio-iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -b '*' -d 15090,15021,15020 >/dev/null && iptables-save -t nat"}},
			[]string{"-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN", "-j REDIRECT --to-ports 15001", "-j REDIRECT --to-ports 15006"}},
		{"istiod", containerdtest.Run{Image: imageset.Pilot, ReadOnly: true, Args: []string{"sh", "-c", "id -u && pilot-discovery discovery --help"}},
			[]string{"1337\n", "--config-dir"}},
		{"install-cni", containerdtest.Run{Image: imageset.InstallCNI, Args: []string{"sh", "-c", "command -v install-cni && test -x /opt/cni/bin/istio-cni && test -x /opt/cni/bin/istio-cni-lookup && echo plugin"}},
			[]string{"/usr/local/bin/install-cni\nplugin\n"}},
		{"app", containerdtest.Run{Image: imageset.App, Args: []string{"grpc-app", "--help"}}, []string{"mtls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Run(ctx, tc.run)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil && strings.TrimSpace(got) == "" {
				t.Errorf("no output")
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
