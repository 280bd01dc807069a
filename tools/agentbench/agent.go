package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

// Which agent runs in the measured pod.
const (
	agentSkiff = "skiff"
	agentIstio = "istio" // Istio's own pilot-agent, built by pkg/istiobin
)

// How the measured agent runs.
const (
	// proxyStandIn runs the agent as an injected sidecar: Envoy's place is
	// taken by the stand-in of pkg/agent/envoy/testdata/fakeproxy, which
	// serves an admin API and opens the ADS stream Envoy would (clusters
	// and listeners, every response ACKed) through the agent's XDS socket.
	// The agent serves SDS, relays that stream and asks for the NameTable
	// on it, as with Envoy.
	proxyStandIn = "stand-in"
	// proxyNone runs the agent proxyless (GRPC_XDS_BOOTSTRAP, the lab's
	// pods): Skiff's agent then opens its own xDS stream.
	proxyNone = "none"
)

// readyStats is what the stand-in reports as Envoy's stats: the initial
// clusters and listeners accepted, the server live and its workers
// started, which is what Istio's readiness check reads.
const readyStats = `cluster_manager.cds.update_rejected: 0
cluster_manager.cds.update_success: 1
listener_manager.lds.update_rejected: 0
listener_manager.lds.update_success: 1
listener_manager.workers_started: 1
server.state: 0
`

// prepareAgent sets up the measured pod for o.agent and o.proxy and
// returns the path of the agent binary it will run.
func prepareAgent(l *lab.Lab, m *lab.Mesh, p *lab.MeshPod, o options) (string, error) {
	bin := filepath.Join(l.Bin, "pilot-agent")
	switch o.agent {
	case agentSkiff:
	case agentIstio:
		dir, err := istiobin.Build()
		if err != nil {
			return "", err
		}
		// The cache is under root's home, which the proxy user cannot read.
		bin = filepath.Join(l.Bin, "istio-pilot-agent")
		if err := copyFile(filepath.Join(dir, istiobin.PilotAgent), bin, 0o755, false); err != nil {
			return "", err
		}
		if o.proxy != proxyStandIn {
			return "", fmt.Errorf("-agent istio needs -proxy %s: Istio's agent asks for the NameTable only on a proxy's stream", proxyStandIn)
		}
		mod, err := istiobin.Module()
		if err != nil {
			return "", err
		}
		// The bootstrap template Istio's proxyv2 image ships, where its
		// ProxyConfig default looks for it.
		if err := copyFile(filepath.Join(mod, "tools/packaging/common/envoy_bootstrap.json"),
			filepath.Join(p.Work, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"), 0o644, true); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("-agent %q: want %s or %s", o.agent, agentSkiff, agentIstio)
	}
	p.AgentBin = bin
	switch o.proxy {
	case proxyNone:
		return bin, nil
	case proxyStandIn:
	default:
		return "", fmt.Errorf("-proxy %q: want %s or %s", o.proxy, proxyStandIn, proxyNone)
	}
	if err := l.Build(".", "./pkg/agent/envoy/testdata/fakeproxy"); err != nil {
		return "", err
	}
	// A wrapper, so that the stand-in's own runtime (it is a Go program
	// too) does not print the agent's GODEBUG traces into its log.
	envoy := filepath.Join(p.Work, "usr/local/bin/envoy")
	script := fmt.Sprintf("#!/bin/sh\nunset GODEBUG\nexec %s \"$@\"\n", filepath.Join(l.Bin, "fakeproxy"))
	if err := writeOwned(envoy, script, 0o755); err != nil {
		return "", err
	}
	stats := filepath.Join(p.Work, "envoy-stats.txt")
	if err := writeOwned(stats, readyStats, 0o644); err != nil {
		return "", err
	}
	for _, d := range []string{"var/run/secrets/workload-spiffe-uds", "var/run/secrets/credential-uds",
		"var/run/secrets/workload-spiffe-credentials", "var/lib/istio/data", "etc/istio/proxy"} {
		if err := mkdirOwned(filepath.Join(p.Work, d)); err != nil {
			return "", err
		}
	}
	p.AgentEnv = []string{
		fmt.Sprintf(`PROXY_CONFIG={"discoveryAddress": "%s:%d", "controlPlaneAuthPolicy": "MUTUAL_TLS", "binaryPath": "%s"}`,
			l.Gateway, lab.SecureXDSPort, envoy),
		"GRPC_XDS_BOOTSTRAP=", // a sidecar, not a proxyless app
		"FAKEPROXY_ADS=1", "FAKEPROXY_ADMIN_PORT=15000",
		"FAKEPROXY_LOG=" + filepath.Join(p.Work, "envoy-stand-in.log"), "FAKEPROXY_STATS=" + stats,
	}
	return bin, nil
}

// startAgent (re)starts the pod's agent and returns the time from exec
// until it is ready (/healthz/ready), and until its DNS proxy also answers
// want from the NameTable, as an app in the pod asks (the query is
// captured to the agent), each polled every 2 ms.
func startAgent(l *lab.Lab, m *lab.Mesh, p *lab.MeshPod, want string) (ready, answering time.Duration, err error) {
	start := time.Now()
	if ready, err = m.RestartAgent(p); err != nil {
		return 0, 0, err
	}
	deadline := start.Add(30 * time.Second)
	for !answers(&p.NS, l.Gateway.String(), want) {
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%s not answered from the pod 30s after the agent started", want)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return ready, time.Since(start), nil
}

// answers reports whether an A query for name, sent from inside ns to
// server:53 (the pod's resolv.conf nameserver), gets an address.
func answers(ns *lab.NS, server, name string) bool {
	ok := false
	_ = netns.Do(ns.Path, func() error {
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(name), dns.TypeA)
		c := &dns.Client{Timeout: 500 * time.Millisecond}
		r, _, err := c.Exchange(q, net.JoinHostPort(server, "53"))
		ok = err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0
		return nil
	})
	return ok
}

// copyFile copies from to to, owned by the proxy user when owned.
func copyFile(from, to string, mode os.FileMode, owned bool) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if owned {
		return writeOwned(to, string(b), mode)
	}
	return os.WriteFile(to, b, mode)
}

// writeOwned writes a file (and its directories) the proxy user owns.
func writeOwned(path, content string, mode os.FileMode) error {
	if err := mkdirOwned(filepath.Dir(path)); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		return err
	}
	return os.Chown(path, 1337, 1337)
}

func mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chown(dir, 1337, 1337)
}
