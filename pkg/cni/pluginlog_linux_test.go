package cni_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/cni/logsink"
	"github.com/skiff-mesh/skiff/pkg/httpserver"
	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// serveSink runs install-cni's log sink in dir, as install-cni does in its
// cni_agent_run_dir, until the test ends.
func serveSink(t testing.TB, dir string) *logtest.Buffer {
	out := &logtest.Buffer{}
	ln, err := logsink.Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- httpserver.Serve(ctx, &http.Server{Handler: logsink.Handler(log)}, ln, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// TestPluginLogsReachTheNodeAgent runs ADDs through libcni with install-cni's
// log sink in the plugin's run dir: what the plugin logged is printed in
// the node agent's log, with the pod (and, without the pod cache, that the
// plugin asked the API server). Istio's own plugin (pkg/istiobin)
// posts to the same sink, as it would during an upgrade.
func TestPluginLogsReachTheNodeAgent(t *testing.T) {
	for _, c := range []struct {
		name     string
		istio    bool
		injected bool
		want     string
	}{
		{"skiff, injected", false, true, `msg="traffic capture installed" scope=cni-plugin component=istio-cni`},
		{"skiff, not injected", false, false, `msg="pod passed through" scope=cni-plugin component=istio-cni`},
		{"istio, not injected", true, false, `msg="excluded due to not containing sidecar annotation" scope=cni-plugin`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t, nil)
			if c.istio {
				n.cni = istioPlugins(t, n)
			}
			out := serveSink(t, n.dir)
			name := netnstest.UniqueName("logs-")
			var annotations map[string]string
			if c.injected {
				annotations = injected(nil)
			}
			createPod(t, name, annotations)
			if _, err := n.add(t, netnstest.New(t), name); err != nil {
				t.Fatal(err)
			}
			polltest.Until(t, "the node agent printing the plugin's record", func() bool {
				return strings.Contains(out.String(), c.want) && strings.Contains(out.String(), "default/"+name)
			})
			// Without install-cni's pod cache here, Skiff's plugin says it
			// asked the API server.
			if !c.istio && !strings.Contains(out.String(), `msg="pod not in the node agent's cache: asked the API server" scope=cni-plugin`) {
				t.Errorf("no record of the API server lookup:\n%s", out.String())
			}
		})
	}
}
