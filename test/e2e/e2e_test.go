// Package e2e runs the binaries together: istiod, pilot-agent,
// istio-iptables and proxyless gRPC apps in network namespaces.
package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestMesh(t *testing.T) {
	netnstest.RequireRoot(t)
	l, err := lab.New("10.46.0.0/24", logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("teardown: %v", err)
		}
		if left := l.Residue(); len(left) > 0 {
			t.Errorf("namespaces left behind: %v", left)
		}
		if left := l.ProcessResidue(); len(left) > 0 {
			t.Errorf("processes left behind: %v", left)
		}
	}()
	if err := l.Build("../..", "./cmd/istiod", "./cmd/pilot-agent", "./cmd/istio-iptables", "./cmd/istioctl", "./examples/grpc-app"); err != nil {
		t.Fatal(err)
	}
	m, err := lab.StartMesh(l, os.Getenv("SKIFF_E2E_PLAINTEXT") == "")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("certificates", func(t *testing.T) {
		for name, p := range m.Pods {
			b, err := os.ReadFile(p.Work + "/var/lib/istio/data/cert-chain.pem")
			if err != nil || !strings.Contains(string(b), "BEGIN CERTIFICATE") {
				t.Errorf("%s: no workload certificate: %v", name, err)
			}
		}
	})

	t.Run("dns", func(t *testing.T) {
		for _, tcp := range []bool{false, true} {
			out, err := m.Dig("productpage", "reviews.default.svc.cluster.local", tcp)
			if err != nil || strings.TrimSpace(out) != "10.96.0.10" {
				t.Errorf("dig reviews (tcp=%t): %q %v", tcp, out, err)
			}
		}
		out, err := m.Dig("productpage", "reviews", false)
		if err != nil || !strings.Contains(out, "10.96.0.10") {
			t.Errorf("dig reviews via the search list: %q %v", out, err)
		}
		out, err = l.Exec(&m.Pods["productpage"].NS, "dig", "+short", "+time=2", "+tries=1", "SRV", "_9080._tcp.reviews.default.svc.cluster.local")
		if err != nil || !strings.Contains(out, "9080 reviews.default.svc.cluster.local.") {
			t.Errorf("dig SRV for reviews: %q %v", out, err)
		}
		out, err = m.Dig("productpage", "api.example.com", false)
		if err != nil || strings.TrimSpace(out) != "240.240.0.1" {
			t.Errorf("dig the ServiceEntry host: %q %v", out, err)
		}
	})

	t.Run("traffic split", func(t *testing.T) {
		out, err := m.Call(400)
		if err != nil {
			t.Fatalf("client: %v\n%s", err, out)
		}
		t.Logf("answers:\n%s", out)
		v1, v2 := count(out, "v1"), count(out, "v2")
		if v1+v2 != 400 {
			t.Fatalf("v1=%d v2=%d, want 400 answers", v1, v2)
		}
		// 10% of 400 is 40; a binomial standard deviation is 6: allow 4 of them.
		if v2 < 16 || v2 > 64 {
			t.Errorf("v2 got %d of 400 calls, want about 40 (the 90/10 split)", v2)
		}
		if m.MTLS && !strings.Contains(out, "mTLS peer spiffe://cluster.local/ns/default/sa/productpage") {
			t.Errorf("calls were not mutual TLS with the client's identity:\n%s", out)
		}
	})

	t.Run("proxy-status", func(t *testing.T) {
		// A long-running client keeps its subscriptions while we look.
		client, err := m.StartClient(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Stop(time.Second)
		var table string
		deadline := time.Now().Add(15 * time.Second)
		for {
			table = proxyStatus(t, l, m)
			if allSynced(table) || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("\n%s", table)
		if !allSynced(table) {
			t.Errorf("not every proxy is in sync:\n%s", table)
		}
		clusters := istioctl(t, l, m, "proxy-config", "clusters", "productpage")
		if !strings.Contains(clusters, "reviews.default.svc.cluster.local   9080   v2       outbound    EDS") {
			t.Errorf("proxy-config clusters:\n%s", clusters)
		}
		secret := istioctl(t, l, m, "proxy-config", "secret", "productpage", "--agent", "http://"+m.Pods["productpage"].IP.String()+":15020")
		t.Logf("\n%s", secret)
		for _, want := range []string{"RESOURCE NAME", "default         Cert Chain   ACTIVE   true", "ROOTCA"} {
			if !strings.Contains(secret, want) {
				t.Errorf("proxy-config secret lacks %q:\n%s", want, secret)
			}
		}
	})
}

// allSynced: each of the three pods has a row, every type it subscribed to
// is SYNCED, and the client has its clusters, endpoints, listener and routes.
func allSynced(table string) bool {
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n")[1:] {
		if f := strings.Fields(strings.ReplaceAll(line, "NOT SENT", "NOT_SENT")); len(f) >= 7 {
			rows[f[0]] = f[2:7]
		}
	}
	for _, pod := range []string{"reviews-v1.default", "reviews-v2.default", "productpage.default"} {
		r, ok := rows[pod]
		if !ok {
			return false
		}
		for _, s := range r {
			if s != "SYNCED" && s != "NOT_SENT" {
				return false
			}
		}
	}
	c := rows["productpage.default"]
	return c[0] == "SYNCED" && c[1] == "SYNCED" && c[2] == "SYNCED" && c[3] == "SYNCED" && rows["reviews-v1.default"][1] == "SYNCED"
}

var countRE = regexp.MustCompile(`(?m)^(\d+) (v\d)\b`)

func count(out, version string) int {
	n := 0
	for _, m := range countRE.FindAllStringSubmatch(out, -1) {
		if m[2] == version {
			c, _ := strconv.Atoi(m[1])
			n += c
		}
	}
	return n
}

// istioctl runs the istioctl binary in the node namespace, pointed at istiod.
func istioctl(t *testing.T, l *lab.Lab, m *lab.Mesh, args ...string) string {
	t.Helper()
	out, err := l.Exec(l.Node, filepath.Join(l.Bin, "istioctl"), append(args, "--istiod", m.DebugURL())...)
	if err != nil {
		t.Fatalf("istioctl %v: %v", args, err)
	}
	return out
}

func proxyStatus(t *testing.T, l *lab.Lab, m *lab.Mesh) string {
	return istioctl(t, l, m, "proxy-status")
}
