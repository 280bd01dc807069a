package interop

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// Addresses of the veth pair between the namespace Istio's pilot-discovery
// runs in and the one Skiff's istioctl calls it from off its host.
const (
	istiodVethIP = "10.77.1.1"
	callerVethIP = "10.77.1.2"
)

// forwardIntoNS listens on a host loopback port and carries each
// connection to target inside ns: the host (and pods, through their own
// forwards) reach a control plane that runs in a namespace of its own.
func forwardIntoNS(t *testing.T, ns *netnstest.NS, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go relay(l, func() (u net.Conn, err error) {
		err = netns.Do(ns.Path, func() error {
			u, err = net.Dial("tcp", target)
			return err
		})
		return u, err
	})
	return l.Addr().String()
}

// skiffctl runs Skiff's istioctl, inside ns when it is given.
func skiffctl(t *testing.T, ns *netnstest.NS, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	bin := skiff(t, "istioctl")
	if ns != nil {
		args = append([]string{"netns", "exec", ns.Name, bin}, args...)
		bin = "ip"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSkiffctlUnderIstioPilotDiscovery runs Skiff's istioctl against
// Istio's own pilot-discovery on a real API server, with Skiff's agent and
// the pod's proxyless client (grpc-go's xDS client) connected: proxy-status
// lists the pod synced, with the cluster and version it reported;
// proxy-config clusters
// shows what Istio's istiod generated for it; proxy-config secret shows
// the certificate the agent serves over SDS. pilot-discovery runs in a
// network namespace of its own, so a caller can be off its host: there it
// answers its debug endpoints 401, and Skiff's istioctl must present a
// service-account token it asks the API server for.
func TestSkiffctlUnderIstioPilotDiscovery(t *testing.T) {
	netnstest.RequireRoot(t)
	discovery := istiobin.Path(t, istiobin.PilotDiscovery)
	mesh := istioInjectFiles(t).mesh
	agent := skiff(t, "pilot-agent")
	skiff(t, "istioctl")
	env, ctx := startPodEnv(t)
	namespace := netnstest.UniqueName("interop-")
	meshObjects(t, ctx, env, namespace)
	// The token Skiff's istioctl asks for: service account default of
	// istiod's namespace (no controller manager makes it here).
	if _, err := env.Client.CoreV1().ServiceAccounts("istio-system").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}

	// pilot-discovery in its namespace, the API server reached through a
	// forward on the same loopback address it has on the host.
	istiodNS := netnstest.New(t)
	forward(t, istiodNS, api.Host, api.Host)
	const secure, plain, debugPort = "127.0.0.1:15012", "127.0.0.1:15010", "8080"
	startProcess(t, t.TempDir(), []string{
		"POD_NAMESPACE=istio-system", "POD_NAME=istiod-0", "REVISION=default", "JWT_POLICY=third-party-jwt",
		"PILOT_CERT_PROVIDER=istiod", "CLUSTER_ID=Kubernetes", "ISTIOD_ADDR=istiod.istio-system.svc:15012",
		"PILOT_ENABLE_ANALYSIS=false", "ENABLE_CA_SERVER=true", "KUBECONFIG=" + env.Kubeconfig,
	}, "ip", "netns", "exec", istiodNS.Name, discovery, "discovery", "--kubeconfig", env.Kubeconfig, "--meshConfig", mesh,
		"--grpcAddr", plain, "--secureGRPCAddr", secure, "--httpAddr", ":"+debugPort,
		"--monitoringAddr", "127.0.0.1:15014", "--httpsAddr", "127.0.0.1:15017")
	secureOnHost := forwardIntoNS(t, istiodNS, secure)
	debugOnHost := "http://" + forwardIntoNS(t, istiodNS, "127.0.0.1:"+debugPort)
	listening(t, secureOnHost)

	p := newPod(t, ctx, env, namespace, secureOnHost)
	bootstrap := p.root + "/etc/istio/proxy/grpc-bootstrap.json"
	serveReviews(t, ctx, env, p)
	startUpstreamDNS(t, p)
	p.start(t, agent, "DISABLE_ENVOY=true", "ISTIO_META_DNS_CAPTURE=true", "GRPC_XDS_BOOTSTRAP="+bootstrap)
	id := p.name + "." + p.namespace
	// The pod's proxyless client, straight on the plaintext port with the
	// node an Istio agent's bootstrap gives it: the agent's own stream
	// carries only CDS and the NameTable.
	directClient(t, forwardIntoNS(t, istiodNS, plain), "sidecar~"+podIP+"~"+id+"~"+namespace+".svc.cluster.local", namespace,
		"xds:///reviews."+namespace+".svc.cluster.local:9080")
	t.Run("proxy-status", func(t *testing.T) {
		row := skiffStatusRow(t, nil, id, "--istiod", debugOnHost)
		for h, want := range map[string]string{"CLUSTER": "Kubernetes", "CDS": "SYNCED", "LDS": "SYNCED", "EDS": "SYNCED", "RDS": "SYNCED"} {
			if row[h] != want {
				t.Errorf("%s = %q, want %q (%v)", h, row[h], want, row)
			}
		}
		if v := row["VERSION"]; v == "" || v == "-" {
			t.Errorf("VERSION %q: want the version the agent reported", v)
		}
	})
	t.Run("proxy-config clusters", func(t *testing.T) {
		out, err := skiffctl(t, nil, "proxy-config", "clusters", id, "--istiod", debugOnHost)
		if err != nil {
			t.Fatalf("istioctl proxy-config clusters: %v\n%s", err, out)
		}
		if !strings.Contains(out, "reviews."+namespace+".svc.cluster.local") || !strings.Contains(out, "9080") {
			t.Errorf("no cluster of reviews:9080 in:\n%s", out)
		}
		t.Logf("istioctl proxy-config clusters:\n%s", out)
	})
	t.Run("proxy-config secret", func(t *testing.T) {
		// Envoy's first SDS request makes the agent get its certificate.
		block, _ := pem.Decode(sdsChain(t, p))
		if block == nil {
			t.Fatal("SDS served no PEM certificate")
		}
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		serial := fmt.Sprintf("%x", leaf.SerialNumber)
		var out string
		defer func() {
			if t.Failed() {
				t.Logf("last istioctl proxy-config secret: %v\n%s", err, out)
			}
		}()
		polltest.Within(t, 30*time.Second, "proxy-config secret shows the SDS leaf "+serial, func() bool {
			out, err = skiffctl(t, p.ns, "proxy-config", "secret", id, "--agent", "http://127.0.0.1:15020")
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				if err != nil || len(f) < 4 || f[0] != "default" {
					continue
				}
				// The serial in hex, with or without leading zeros.
				if n, ok := new(big.Int).SetString(f[len(f)-3], 16); ok && n.Cmp(leaf.SerialNumber) == 0 {
					return true
				}
			}
			return false
		})
		t.Logf("istioctl proxy-config secret:\n%s", out)
	})
	t.Run("off-host caller presents a token", func(t *testing.T) {
		caller := netnstest.New(t)
		netnstest.Veth(t, istiodNS, caller, istiodVethIP+"/24", callerVethIP+"/24")
		forward(t, caller, api.Host, api.Host)
		offHost := "http://" + net.JoinHostPort(istiodVethIP, debugPort)
		// Without a token Istio's istiod refuses the caller.
		var status string
		caller.Do(t, func() error {
			c := &net.Dialer{Timeout: 5 * time.Second}
			conn, err := c.Dial("tcp", net.JoinHostPort(istiodVethIP, debugPort))
			if err != nil {
				return err
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /debug/syncz HTTP/1.0\r\nHost: istiod\r\n\r\n")
			b := make([]byte, 64)
			n, _ := io.ReadAtLeast(conn, b, 12)
			status = string(b[:n])
			return nil
		})
		if !strings.HasPrefix(status, "HTTP/1.0 401") {
			t.Fatalf("off-host GET /debug/syncz without a token: %q, want 401", status)
		}
		row := skiffStatusRow(t, caller, id, "--istiod", offHost, "--kubeconfig", env.Kubeconfig)
		if row["CDS"] != "SYNCED" || row["CLUSTER"] != "Kubernetes" {
			t.Errorf("off-host proxy-status row %v", row)
		}
		out, err := skiffctl(t, caller, "proxy-config", "clusters", id, "--istiod", offHost, "--kubeconfig", env.Kubeconfig)
		if err != nil || !strings.Contains(out, "reviews."+namespace+".svc.cluster.local") {
			t.Errorf("off-host proxy-config clusters: %v\n%s", err, out)
		}
	})
}

// directClient connects grpc-go's xDS client to an xDS address as the
// proxyless client of node id in namespace ns, resolving target.
func directClient(t *testing.T, addr, node, ns, target string) {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": %q, "metadata": {"GENERATOR": "grpc", "NAMESPACE": %q, "CLUSTER_ID": "Kubernetes",
    "ISTIO_VERSION": "1.31.0", "SERVICE_ACCOUNT": "app", "INSTANCE_IPS": %q, "PROXY_CONFIG": {}}}
}`, addr, node, ns, podIP)
	builder, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(builder))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	cc.Connect()
}

// statusRow finds id's row in a proxy-status table and splits it by the
// header's columns (a cell may hold a space: "NOT SENT").
func statusRow(table, id string) map[string]string {
	lines := strings.Split(table, "\n")
	var header string
	for _, l := range lines {
		if strings.HasPrefix(l, "NAME ") {
			header = l
			continue
		}
		if header == "" || !strings.HasPrefix(l, id+" ") {
			continue
		}
		names := strings.Fields(header)
		row := map[string]string{}
		for i, h := range names {
			start := strings.Index(header, h)
			end := len(l)
			if i+1 < len(names) {
				end = min(strings.Index(header, names[i+1]), len(l))
			}
			if start < len(l) {
				row[h] = strings.TrimSpace(l[start:end])
			}
		}
		return row
	}
	return nil
}

// skiffStatusRow runs Skiff's istioctl proxy-status until it lists id
// synced on CDS, LDS, EDS and RDS, and returns id's row by column.
func skiffStatusRow(t *testing.T, ns *netnstest.NS, id string, args ...string) map[string]string {
	t.Helper()
	var out string
	var row map[string]string
	defer func() {
		if t.Failed() {
			t.Logf("last istioctl proxy-status:\n%s", out)
		}
	}()
	polltest.Within(t, 30*time.Second, "skiff istioctl proxy-status lists "+id, func() bool {
		var err error
		out, err = skiffctl(t, ns, append([]string{"proxy-status"}, args...)...)
		if err != nil {
			return false
		}
		row = statusRow(out, id)
		return row != nil && row["CDS"] == "SYNCED" && row["LDS"] == "SYNCED" && row["EDS"] == "SYNCED" && row["RDS"] == "SYNCED"
	})
	t.Logf("istioctl proxy-status:\n%s", out)
	return row
}
