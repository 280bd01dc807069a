package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	for _, mode := range []Mode{InitMode, CNIMode} {
		ok := t.Run(mode.String(), func(t *testing.T) {
			for _, s := range Steps(mode) {
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
