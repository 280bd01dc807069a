// Command mesh is `make demo`: it builds a small mesh in network namespaces
// (istiod with its CA in a "node", three pods on a bridge, each with
// pilot-agent and a proxyless gRPC app), shows what happens, and removes
// everything, also on Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istioctl/proxyview"
	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

func say(format string, args ...any) { fmt.Printf("\n\033[1m== "+format+"\033[0m\n", args...) }

func main() {
	root := flag.String("root", ".", "the repository root (for building)")
	verbose := flag.Bool("v", false, "show every process's log")
	calls := flag.Int("calls", 200, "calls the client makes")
	flag.Parse()
	if err := run(*root, *verbose, *calls); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(root string, verbose bool, calls int) (err error) {
	var log io.Writer = io.Discard
	if verbose {
		log = os.Stdout
	}
	l, err := lab.New("10.47.0.0/24", log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			fmt.Println("\ninterrupted: cleaning up")
		case <-finished:
		}
	}()
	defer func() {
		say("Teardown: every process, namespace, rule and file goes")
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if left := append(l.Residue(), l.ProcessResidue()...); len(left) > 0 {
			fmt.Println("  left behind:", left)
		} else {
			fmt.Println("  nothing left behind")
		}
	}()

	say("Building istiod, pilot-agent, istio-iptables and the demo app")
	if err := l.Build(root, "./cmd/istiod", "./cmd/pilot-agent", "./cmd/istio-iptables", "./examples/grpc-app"); err != nil {
		return err
	}
	say("Starting istiod in the node namespace (%s), then three pods", l.Gateway)
	fmt.Println("  mesh: reviews v1 and v2 behind a VirtualService (90/10), a DestinationRule asking for ISTIO_MUTUAL,")
	fmt.Println("        a ServiceEntry for api.example.com; each pod: istio-iptables (DNS capture), pilot-agent as uid 1337, the app")
	m, err := lab.StartMesh(l, true)
	if err != nil {
		return err
	}
	for _, name := range []string{"reviews-v1", "reviews-v2", "productpage"} {
		p := m.Pods[name]
		fmt.Printf("  %-12s %s  agent ready\n", name, p.IP)
	}

	say("Identities issued by istiod's CA (istioctl proxy-config secret, from each agent)")
	for _, name := range []string{"productpage", "reviews-v1"} {
		out, err := l.Get(&m.Pods[name].NS, "http://127.0.0.1:15020/debug/certs")
		if err != nil {
			return err
		}
		var secrets []proxyview.Secret
		if err := json.Unmarshal([]byte(out), &secrets); err != nil {
			return err
		}
		fmt.Printf("  %s:\n", name)
		var b strings.Builder
		proxyview.WriteSecrets(&b, secrets)
		fmt.Print(indent(b.String()))
		chain, _ := os.ReadFile(filepath.Join(m.Pods[name].Work, "var/lib/istio/data/cert-chain.pem"))
		fmt.Printf("    SAN: %s\n", sanOf(chain))
	}

	say("Names resolved through the captured DNS (dig in productpage: the query to %s:53 lands on the agent)", l.Gateway)
	for _, q := range []string{"reviews", "reviews.default.svc.cluster.local", "api.example.com"} {
		out, err := m.Dig("productpage", q, false)
		if err != nil {
			return err
		}
		fmt.Printf("  %-36s -> %s\n", q, strings.Join(strings.Fields(out), " "))
	}

	say("%d gRPC calls from productpage to xds:///reviews.default.svc.cluster.local:9080, mTLS", calls)
	out, err := m.Call(calls)
	if err != nil {
		return fmt.Errorf("client: %w\n%s", err, out)
	}
	fmt.Print(indent(out))

	say("istioctl proxy-status (from istiod's debug port), with a client connected")
	client, err := m.StartClient(20 * time.Second)
	if err != nil {
		return err
	}
	time.Sleep(time.Second)
	sync, err := l.Get(l.Node, m.DebugURL()+"/debug/syncz")
	if err != nil {
		return err
	}
	var streams []proxyview.ProxyStatus
	if err := json.Unmarshal([]byte(sync), &streams); err != nil {
		return err
	}
	var b strings.Builder
	proxyview.WriteStatus(&b, streams, "istiod", "")
	fmt.Print(indent(b.String()))

	say("istioctl proxy-config clusters productpage.default")
	dumpJSON, err := l.Get(l.Node, m.DebugURL()+"/debug/config_dump?proxyID=sidecar~"+m.Pods["productpage"].IP.String()+"~productpage.default~default.svc.cluster.local")
	if err != nil {
		return err
	}
	var dump proxyview.Dump
	if err := json.Unmarshal([]byte(dumpJSON), &dump); err != nil {
		return err
	}
	b.Reset()
	proxyview.WriteConfig(&b, &dump, "clusters")
	fmt.Print(indent(b.String()))
	client.Stop(time.Second)
	return ctx.Err()
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}
