package imageset

import (
	"path/filepath"

	"github.com/skiff-mesh/skiff/pkg/ociimage"
)

// The users Istio's images know: istio-proxy is uid and gid 1337, the
// owner the capture rules exempt.
const (
	passwd = "root:x:0:0:root:/root:/bin/sh\n" +
		"istio-proxy:x:1337:1337:istio-proxy:/home/istio-proxy:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	group   = "root:x:0:\nistio-proxy:x:1337:\nnobody:x:65534:\n"
	pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// base is the first layer of every image but pause: users, the usual
// directories, and busybox with its applets.
func base(h host) []ociimage.Entry {
	e := []ociimage.Entry{
		ociimage.File("/etc/passwd", 0o644, []byte(passwd)),
		ociimage.File("/etc/group", 0o644, []byte(group)),
		ociimage.Dir("/root", 0o700),
		ociimage.Dir("/home/istio-proxy", 0o755).Own(1337, 1337),
		ociimage.Dir("/tmp", 0o777|ociimage.Sticky),
		ociimage.Dir("/run", 0o755),
		ociimage.Dir("/var/run", 0o755),
		ociimage.HostFile("/bin/busybox", 0o755, hostBusybox),
	}
	for _, a := range h.applets {
		if a != "/bin/busybox" {
			e = append(e, ociimage.Symlink(a, "/bin/busybox"))
		}
	}
	return e
}

// specs are the images, from the binaries in bin and the host's files.
func specs(bin string, h host) ([]spec, error) {
	b := func(name string) string { return filepath.Join(bin, name) }
	exe := func(p, name string) ociimage.Entry { return ociimage.HostFile(p, 0o755, b(name)) }
	return []spec{{
		short: "proxyv2",
		image: ociimage.Image{
			Names: []string{Proxy},
			Config: ociimage.Config{
				Entrypoint: []string{"/usr/local/bin/pilot-agent"},
				Env:        []string{pathEnv},
				WorkingDir: "/",
			},
			Layers: [][]ociimage.Entry{base(h), h.iptables, {
				exe("/usr/local/bin/pilot-agent", "pilot-agent"),
				exe("/usr/local/bin/istio-iptables", "istio-iptables"),
				// The agent writes the proxy's bootstrap and files here
				// (an emptyDir in an injected pod; writable without one).
				ociimage.Dir("/etc/istio/proxy", 0o775).Own(1337, 1337),
				ociimage.Dir("/var/lib/istio/data", 0o775).Own(1337, 1337),
				ociimage.Dir("/var/lib/istio/envoy", 0o775).Own(1337, 1337),
			}},
		},
	}, {
		short: "pilot",
		image: ociimage.Image{
			Names: []string{Pilot},
			Config: ociimage.Config{
				Entrypoint: []string{"/usr/local/bin/pilot-discovery"},
				Env:        []string{pathEnv},
				User:       "1337:1337",
				WorkingDir: "/",
			},
			Layers: [][]ociimage.Entry{base(h), {
				exe("/usr/local/bin/pilot-discovery", "istiod"),
				ociimage.Symlink("/usr/local/bin/istiod", "pilot-discovery"),
			}},
		},
	}, {
		short: "install-cni",
		image: ociimage.Image{
			Names: []string{InstallCNI},
			Config: ociimage.Config{
				Cmd:        []string{"/usr/local/bin/install-cni"},
				Env:        []string{pathEnv + ":/opt/cni/bin"},
				WorkingDir: "/opt/cni/bin",
			},
			Layers: [][]ociimage.Entry{base(h), {
				exe("/usr/local/bin/install-cni", "install-cni"),
				exe("/opt/cni/bin/istio-cni", "cni-plugin"),
				exe("/opt/cni/bin/istio-cni-lookup", "cni-lookup"),
			}},
		},
	}, {
		short: "app",
		image: ociimage.Image{
			Names: []string{App},
			Config: ociimage.Config{
				Entrypoint: []string{"/usr/local/bin/grpc-app"},
				Env:        []string{pathEnv},
				WorkingDir: "/",
			},
			Layers: [][]ociimage.Entry{base(h), {
				exe("/usr/local/bin/grpc-app", "grpc-app"),
				exe("/usr/local/bin/capture-listener", "capture-listener"),
			}},
		},
	}, {
		short: "pause",
		image: ociimage.Image{
			Names: []string{Pause, PauseAlias},
			Config: ociimage.Config{
				Entrypoint: []string{"/pause"},
				User:       "65535:65535",
				WorkingDir: "/",
			},
			Layers: [][]ociimage.Entry{{exe("/pause", "pause")}},
		},
	}, {
		short: "shell",
		image: ociimage.Image{
			Names: []string{Shell},
			Config: ociimage.Config{
				Cmd:        []string{"/bin/sh"},
				Env:        []string{pathEnv},
				WorkingDir: "/",
			},
			Layers: [][]ociimage.Entry{base(h)},
		},
	}}, nil
}
