package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/kubenode"
)

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func startCluster(t *testing.T) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root (CI runs as root)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tars := buildImages(t)
	n := kubenode.Start(t, kubenode.Options{Images: tars, Hosts: []kubenode.HostEntry{ExternalHost}})
	c, err := New(n, root, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCluster installs Skiff with helm on a real node in both interception
// modes and checks what a user would (Steps): injection, capture,
// identities, DNS through the agent, the split over mTLS, and a clean
// uninstall while the pods still run.
func TestCluster(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	istioctl := istiobin.Path(t, istiobin.Istioctl)
	for _, mode := range []Mode{InitMode, CNIMode} {
		ok := t.Run(mode.String(), func(t *testing.T) {
			for _, s := range withIstioctl(Steps(mode), istioctl) {
				if !t.Run(s.Name, func(t *testing.T) {
					c.SetLog(testLog{t})
					if err := s.Run(c, ctx); err != nil {
						t.Fatal(err)
					}
				}) && !s.Then {
					t.FailNow()
				}
			}
		})
		if !ok {
			return
		}
	}
}

// withIstioctl adds, after proxy-status, a step that runs Istio's own
// istioctl against the cluster (the demo's Steps do not: they need no
// Istio binary).
func withIstioctl(steps []Step, istioctl string) []Step {
	for i, s := range steps {
		if s.Name == "proxy-status" {
			check := Step{"Istio's istioctl version", func(c *Cluster, ctx context.Context) error { return c.CheckIstioVersionCommand(ctx, istioctl) }, true}
			return slices.Insert(steps, i+1, check)
		}
	}
	return steps
}
