package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestSkiffAgentNameTableOnEnvoysStream runs Skiff's pilot-agent as a
// sidecar under Istio's pilot-discovery, with a stand-in Envoy that opens
// its ADS stream from the bootstrap the agent wrote, as Envoy does: delta
// by default, as with Istio's agent, or state of the world with
// ISTIO_DELTA_XDS=false. As Istio's agent, Skiff's asks for the NameTable
// on that stream: the DNS proxy answers from Istio's NameTable, the
// stand-in is never sent it, and Istio's istioctl proxy-status lists the
// pod once, not once per stream.
func TestSkiffAgentNameTableOnEnvoysStream(t *testing.T) {
	netnstest.RequireRoot(t)
	agent := skiff(t, "pilot-agent")
	envoy := skiff(t, "pkg/agent/envoy/testdata/fakeproxy")
	env, ctx := startPodEnv(t)
	namespace := netnstest.UniqueName("interop-")
	meshObjects(t, ctx, env, namespace)
	secure, plain := startIstioPilot(t, env)

	// One pod at a time (each subtest stops its agent), in one namespace.
	for _, tc := range []struct {
		name   string
		env    []string
		stream string // what the stand-in records per response
	}{
		{"delta, the default", nil, "ads delta "},
		{"state of the world", []string{"ISTIO_DELTA_XDS=false"}, "ads "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t, ctx, env, namespace, secure)
			events := filepath.Join(t.TempDir(), "envoy.log")
			p.start(t, agent, append([]string{`PROXY_CONFIG={"binaryPath": "` + envoy + `"}`, "ISTIO_META_DNS_CAPTURE=true",
				"FAKEPROXY_ADS=1", "FAKEPROXY_LOG=" + events, "FAKEPROXY_ADMIN_PORT=15000"}, tc.env...)...)
			logged := func() string { b, _ := os.ReadFile(events); return string(b) }
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("stand-in Envoy:\n%s", logged())
				}
			})

			name := "reviews." + p.namespace + ".svc.cluster.local"
			polltest.Within(t, 30*time.Second, "DNS proxy answers "+name, func() bool {
				return slices.Contains(p.lookup(t, name), "10.0.0.50")
			})
			polltest.Within(t, 30*time.Second, "the stand-in's clusters and listeners", func() bool {
				l := logged()
				return strings.Contains(l, tc.stream+"type.googleapis.com/envoy.config.cluster.v3.Cluster\n") &&
					strings.Contains(l, tc.stream+"type.googleapis.com/envoy.config.listener.v3.Listener\n")
			})
			if l := logged(); strings.Contains(l, "NameTable") {
				t.Errorf("the stand-in Envoy was sent the NameTable:\n%s", l)
			}
			proxyStatusOnce(t, plain, p)
		})
	}
}

// proxyStatusOnce: Istio's istioctl proxy-status lists p once, its CDS and
// LDS SYNCED.
func proxyStatusOnce(t *testing.T, xdsAddr string, p *pod) {
	t.Helper()
	id := p.name + "." + p.namespace
	var out, problem string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last proxy-status (%s):\n%s", problem, out)
		}
	})
	polltest.Within(t, 30*time.Second, "istioctl proxy-status lists "+id+" once, CDS and LDS SYNCED", func() bool {
		var err error
		if out, err = istioctl(t, xdsAddr, "proxy-status", "--verbosity", "1"); err != nil {
			problem = err.Error()
			return false
		}
		var rows []proxyStatusRow
		for _, r := range parseProxyStatus(out) {
			if strings.HasPrefix(r.name, id) {
				rows = append(rows, r)
			}
		}
		if len(rows) != 1 {
			problem = fmt.Sprintf("%d rows", len(rows))
			return false
		}
		problem = fmt.Sprintf("CDS %q, LDS %q", rows[0].cols["CDS"], rows[0].cols["LDS"])
		return strings.HasPrefix(rows[0].cols["CDS"], "SYNCED") && strings.HasPrefix(rows[0].cols["LDS"], "SYNCED")
	})
}
