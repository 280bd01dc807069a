package lab

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/skiff-mesh/skiff/pkg/netns"
)

// MeshPod is a pod of the demo mesh: its namespace, its agent and its app.
type MeshPod struct {
	*Pod
	Name, Namespace, ServiceAccount, Version string
	// Work is the pod's file system root for the agent (tokens, sockets, certs).
	Work  string
	Agent *Proc
	App   *Proc
	// AgentBin, when set, is the pilot-agent binary RestartAgent runs
	// instead of the lab's (Istio's own, say); AgentEnv is added to the
	// pod's agent environment, after SKIFF_AGENT_ENV, so it wins.
	AgentBin string
	AgentEnv []string

	agentEnv []string
}

// RestartAgent starts the pod's agent (after Stop) and returns the time from
// exec to its readiness, polled every 2 ms.
func (m *Mesh) RestartAgent(p *MeshPod) (time.Duration, error) {
	start := time.Now()
	var err error
	env := append(append(slices.Clip(p.agentEnv), strings.Fields(os.Getenv("SKIFF_AGENT_ENV"))...), p.AgentEnv...)
	bin := p.AgentBin
	if bin == "" {
		bin = filepath.Join(m.Lab.Bin, "pilot-agent")
	}
	if p.Agent, err = m.Lab.Start(p.Name+"/agent", &p.NS, 1337, p.Work, env, bin, "proxy", "sidecar"); err != nil {
		return 0, err
	}
	if err := waitReady(&p.NS, 20*time.Second); err != nil {
		return 0, fmt.Errorf("agent %s: %w", p.Name, err)
	}
	return time.Since(start), nil
}

// Mesh is istiod in the node namespace and pods with agents around it.
type Mesh struct {
	Lab       *Lab
	ConfigDir string
	Istiod    *Proc
	Tokens    *TokenIssuer
	Pods      map[string]*MeshPod
	// MTLS makes the apps use xDS credentials.
	MTLS bool
}

// Istiod's ports on the node.
const (
	XDSPort = 15010
	// SecureXDSPort is where the agents connect, as injected sidecars do:
	// TLS, verified against the mesh root, proving the pod's identity.
	SecureXDSPort = 15012
	DebugPort     = 8080
)

var meshYAML = template.Must(template.New("mesh").Parse(`apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec:
  clusterIP: 10.96.0.10
  selector: {app: reviews}
  ports: [{name: grpc, port: 9080, targetPort: 9080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: reviews-lab, namespace: default, labels: {kubernetes.io/service-name: reviews}}
addressType: IPv4
ports: [{name: grpc, port: 9080}]
endpoints:
{{- range .Reviews}}
- addresses: ["{{.IP}}"]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: {{.Name}}}
{{- end}}
{{- range .All}}
---
apiVersion: v1
kind: Pod
metadata: {name: {{.Name}}, namespace: {{.Namespace}}, labels: {app: {{.App}}{{if .Version}}, version: {{.Version}}{{end}}{{if $.MTLS}}, security.istio.io/tlsMode: istio{{end}}}}
spec: {serviceAccountName: {{.ServiceAccount}}, containers: [{name: app, image: grpc-app}]}
status: {podIP: {{.IP}}}
{{- end}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 90
    - destination: {host: reviews, subset: v2}
      weight: 10
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews.default.svc.cluster.local
  trafficPolicy:
{{- if .MTLS}}
    tls: {mode: ISTIO_MUTUAL}
{{- end}}
    loadBalancer: {simple: ROUND_ROBIN}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: example-api, namespace: default}
spec:
  hosts: [api.example.com]
  addresses: [240.240.0.1]
  ports: [{number: 443, name: https, protocol: TLS}]
  location: MESH_EXTERNAL
  resolution: DNS
`))

type podSpec struct{ Name, Namespace, App, Version, ServiceAccount, IP string }

// StartMesh writes the mesh configuration for the given pods, starts istiod
// in the node namespace, then each pod: capture rules (istio-iptables with
// DNS capture), pilot-agent as the proxy user, and the app.
func StartMesh(l *Lab, mtls bool) (*Mesh, error) {
	m := &Mesh{Lab: l, ConfigDir: filepath.Join(l.Dir, "mesh"), Pods: map[string]*MeshPod{}, MTLS: mtls}
	tokens, err := l.NewTokenIssuer()
	if err != nil {
		return nil, err
	}
	m.Tokens = tokens
	specs := []podSpec{
		{"reviews-v1", "default", "reviews", "v1", "reviews", ""},
		{"reviews-v2", "default", "reviews", "v2", "reviews", ""},
		{"productpage", "default", "productpage", "", "productpage", ""},
	}
	var reviews []podSpec
	for i := range specs {
		p, err := l.AddPod(specs[i].Name, specs[i].Namespace)
		if err != nil {
			return nil, err
		}
		specs[i].IP = p.IP.String()
		m.Pods[specs[i].Name] = &MeshPod{Pod: p, Name: specs[i].Name, Namespace: specs[i].Namespace, ServiceAccount: specs[i].ServiceAccount, Version: specs[i].Version}
		if specs[i].App == "reviews" {
			reviews = append(reviews, specs[i])
		}
	}
	if err := os.MkdirAll(m.ConfigDir, 0o755); err != nil {
		return nil, err
	}
	var b strings.Builder
	if err := meshYAML.Execute(&b, map[string]any{"Reviews": reviews, "All": specs, "MTLS": mtls}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(m.ConfigDir, "mesh.yaml"), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}

	gw := l.Gateway.String()
	m.Istiod, err = l.Start("istiod", l.Node, 0, l.Dir, nil, filepath.Join(l.Bin, "istiod"),
		"--config-dir", m.ConfigDir, "--grpcAddr", gw+fmt.Sprintf(":%d", XDSPort), "--secureGRPCAddr", gw+fmt.Sprintf(":%d", SecureXDSPort),
		"--monitoringAddr", gw+":15014", "--httpAddr", gw+fmt.Sprintf(":%d", DebugPort), "--ca-dir", filepath.Join(l.Dir, "ca"),
		"--jwt-public-key", tokens.PublicKeyFile, "--jwt-issuer", tokens.Issuer, "--debounce-after", "20ms")
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(l, fmt.Sprintf("http://%s:15014/ready", gw), 20*time.Second); err != nil {
		return nil, fmt.Errorf("istiod: %w", err)
	}
	for _, s := range specs {
		if err := m.startPod(m.Pods[s.Name]); err != nil {
			return nil, fmt.Errorf("pod %s: %w", s.Name, err)
		}
	}
	return m, nil
}

// waitHTTP polls url from the node namespace until it answers 200.
func waitHTTP(l *Lab, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := l.Exec(l.Node, "curl", "-sf", "-o", "/dev/null", "-w", "%{http_code}", url)
		if err == nil && strings.TrimSpace(out) == "200" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s", url, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Exec runs a command inside ns and returns its output.
func (l *Lab) Exec(ns *NS, name string, args ...string) (string, error) {
	out, err := runOut("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	return out, err
}

func (m *Mesh) startPod(p *MeshPod) error {
	l := m.Lab
	p.Work = filepath.Join(l.Dir, "pods", p.Name)
	tok, err := m.Tokens.Token(p.Namespace, p.ServiceAccount)
	if err != nil {
		return err
	}
	tokPath := filepath.Join(p.Work, "var/run/secrets/tokens/istio-token")
	if err := os.MkdirAll(filepath.Dir(tokPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(tokPath, []byte(tok), 0o644); err != nil {
		return err
	}
	// The mesh root, where the injector mounts istio-ca-root-cert.
	root, err := os.ReadFile(filepath.Join(l.Dir, "ca", "ca-cert.pem"))
	if err != nil {
		return fmt.Errorf("mesh root: %w", err)
	}
	rootPath := filepath.Join(p.Work, "var/run/secrets/istio/root-cert.pem")
	if err := os.MkdirAll(filepath.Dir(rootPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(rootPath, root, 0o644); err != nil {
		return err
	}
	if err := os.Chown(p.Work, 1337, 1337); err != nil {
		return err
	}
	if err := chownR(p.Work, 1337); err != nil {
		return err
	}
	// Capture: proxyless apps talk to each other directly, so only DNS is
	// captured (to the agent); no TCP goes through a proxy.
	if out, err := l.Exec(&p.NS, filepath.Join(l.Bin, "istio-iptables"), "-u", "1337", "-i", "", "-b", "", "--redirect-dns"); err != nil {
		return fmt.Errorf("istio-iptables: %w: %s", err, out)
	}
	bootstrap := filepath.Join(p.Work, "etc/istio/proxy/grpc-bootstrap.json")
	gw := l.Gateway.String()
	env := []string{
		"POD_NAME=" + p.Name, "POD_NAMESPACE=" + p.Namespace, "INSTANCE_IP=" + p.IP.String(), "SERVICE_ACCOUNT=" + p.ServiceAccount,
		fmt.Sprintf(`PROXY_CONFIG={"discoveryAddress": "%s:%d", "controlPlaneAuthPolicy": "MUTUAL_TLS"}`, gw, SecureXDSPort),
		"ISTIOD_SAN=istiod.istio-system.svc", // the gateway's IP is not in istiod's certificate
		"ISTIO_META_DNS_CAPTURE=true", "ECC_SIGNATURE_ALGORITHM=ECDSA", "GRPC_XDS_BOOTSTRAP=" + bootstrap,
		"OUTPUT_CERTS=" + filepath.Join(p.Work, "var/lib/istio/data"),
	}
	p.agentEnv = env
	if _, err := m.RestartAgent(p); err != nil {
		return err
	}
	if p.Version == "" {
		return nil // the client runs on demand
	}
	args := []string{"--mode", "server", "--addr", ":9080", "--version", p.Version}
	if m.MTLS {
		args = append(args, "--mtls")
	}
	p.App, err = l.Start(p.Name+"/app", &p.NS, 1337, p.Work, []string{"GRPC_XDS_BOOTSTRAP=" + bootstrap}, filepath.Join(l.Bin, "grpc-app"), args...)
	return err
}

func (m *Mesh) clientArgs(calls int) []string {
	args := []string{"--mode", "client", "--calls", fmt.Sprint(calls)}
	if m.MTLS {
		args = append(args, "--mtls")
	}
	return args
}

func (m *Mesh) clientEnv() []string {
	return []string{"GRPC_XDS_BOOTSTRAP=" + filepath.Join(m.Pods["productpage"].Work, "etc/istio/proxy/grpc-bootstrap.json")}
}

// Call runs the client app in the productpage pod: calls RPCs to reviews
// through xDS and returns its output (counts per answer).
func (m *Mesh) Call(calls int) (string, error) {
	p := m.Pods["productpage"]
	args := append([]string{"netns", "exec", p.NS.Name, "setpriv", "--reuid=1337", "--regid=1337", "--clear-groups", "env"}, m.clientEnv()...)
	args = append(args, filepath.Join(m.Lab.Bin, "grpc-app"))
	return runOut("ip", append(args, m.clientArgs(calls)...)...)
}

// StartClient runs a client that makes one call and then keeps its xDS
// subscriptions for linger, as a long-running app would.
func (m *Mesh) StartClient(linger time.Duration) (*Proc, error) {
	p := m.Pods["productpage"]
	return m.Lab.Start("productpage/app", &p.NS, 1337, p.Work, m.clientEnv(), filepath.Join(m.Lab.Bin, "grpc-app"),
		append(m.clientArgs(1), "--linger", linger.String())...)
}

// Dig resolves name from a pod as an ordinary app (root, not the proxy
// user): the query goes to resolv.conf's server and is captured to the agent.
func (m *Mesh) Dig(pod, name string, tcp bool) (string, error) {
	args := []string{"+short", "+time=2", "+tries=1", name}
	if tcp {
		args = append([]string{"+tcp"}, args...)
	}
	return m.Lab.Exec(&m.Pods[pod].NS, "dig", args...)
}

// DebugURL is istiod's debug address, reachable from the node namespace.
func (m *Mesh) DebugURL() string { return fmt.Sprintf("http://%s:%d", m.Lab.Gateway, DebugPort) }

// Get fetches url from inside ns.
func (l *Lab) Get(ns *NS, url string) (string, error) {
	return l.Exec(ns, "curl", "-sf", url)
}

// waitReady polls the agent's /healthz/ready inside ns every 2 ms, over a
// socket made in the namespace (no process per poll).
func waitReady(ns *NS, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var conn net.Conn
		err := netns.Do(ns.Path, func() (err error) {
			conn, err = net.DialTimeout("tcp", "127.0.0.1:15020", time.Second)
			return err
		})
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(conn, "GET /healthz/ready HTTP/1.0\r\n\r\n")
			status, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if strings.Contains(status, " 200 ") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
