// Command podbench is `make bench-pods`: on a real node (pkg/kubenode) it
// creates pods one after another and times create → app running and
// create → Ready, without injection, injected with istio-init, and
// injected in CNI mode, and reads containerd's log for how long each pod's
// sandbox took (the CNI ADD chain is most of it). Then it creates pods in
// bursts (-burst at once): without Istio, with istio-cni chained but the
// pods not injected, and injected in CNI mode.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/kubenode"
	"github.com/skiff-mesh/skiff/test/cluster"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	n := flag.Int("n", 20, "pods per case, one at a time")
	burst := flag.Int("burst", 30, "pods per burst, created at once (0: none)")
	rounds := flag.Int("rounds", 3, "bursts per case")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *root, *n, *burst, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "podbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string, n, burst, rounds int) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	tars, err := cluster.BuildImages(ctx, filepath.Join(root, "bin", "images"), nil)
	if err != nil {
		return err
	}
	node, err := kubenode.StartNode(ctx, kubenode.Options{Images: tars})
	if err != nil {
		return err
	}
	defer node.Stop()
	c, err := cluster.New(node, root, os.Stderr)
	if err != nil {
		return err
	}
	ns := func(name string, inject bool) error {
		o := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if inject {
			o.Labels = map[string]string{"istio-injection": "enabled"}
		}
		_, err := c.Kube.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		return err
	}
	fmt.Printf("pods created one at a time, %d per case, then %d bursts of %d at once; median (and max) in ms\n", n, rounds, burst)
	fmt.Printf("%-46s %14s %14s %14s\n", "case", "app running", "Ready", "sandbox")
	report := func(name string, s []cluster.Startup, sandbox []time.Duration) {
		var app, ready []time.Duration
		for _, x := range s {
			app = append(app, x.AppRunning)
			if x.Ready > 0 {
				ready = append(ready, x.Ready)
			}
		}
		fmt.Printf("%-46s %14s %14s %14s\n", name, stat(app), stat(ready), stat(sandbox))
	}
	// No injection: no Istio at all.
	if err := ns("plain", false); err != nil {
		return err
	}
	s, err := c.StartPods(ctx, "plain", n, false, true)
	if err != nil {
		return err
	}
	report("no injection", s, c.SandboxTimes("startup-"))
	base := len(c.SandboxTimes("startup-"))
	// apiLookups reports the ADDs of pods named so that install-cni's cache
	// could not answer (the plugin logs them), once istio-cni is installed.
	cniInstalled := false
	apiLookups := func(pods string) {
		if !cniInstalled {
			return
		}
		lines, err := c.PluginLog(ctx, "pod not in the node agent's cache: asked the API server")
		if err != nil {
			fmt.Printf("  (install-cni's log: %v)\n", err)
			return
		}
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "pod="+pods) {
				n++
			}
		}
		fmt.Printf("  of which asked the API server, not install-cni's cache: %d\n", n)
	}
	// Bursts: pods created at once, each timed from its burst's start.
	bursts := 0
	startBurst := func(name, ns string, agentOnly bool) error {
		for i := 0; i < rounds && burst > 0; i++ {
			bursts++
			prefix := fmt.Sprintf("burst%d-%d", bursts, time.Now().UnixNano()%1e6)
			s, err := c.StartBurst(ctx, ns, prefix, burst, agentOnly, false)
			if err != nil {
				return err
			}
			report(fmt.Sprintf("%s, %d at once (%d)", name, burst, i+1), s, c.SandboxTimes(prefix+"-"))
			apiLookups(ns + "/" + prefix + "-")
		}
		return nil
	}
	// istio-init: the agent alone in istio-proxy (no Envoy here), so the pod gets Ready.
	if err := c.InstallIstio(ctx, cluster.InitMode); err != nil {
		return err
	}
	if err := ns("init", true); err != nil {
		return err
	}
	if s, err = c.StartPods(ctx, "init", n, true, true); err != nil {
		return err
	}
	report("istio-init (agent-only sidecar)", s, c.SandboxTimes("startup-")[base:])
	base = len(c.SandboxTimes("startup-"))
	if err := c.UninstallIstio(ctx, cluster.InitMode); err != nil {
		return err
	}
	// The bursts come after the pods created one at a time of the same
	// set-up: the kubelet's clean-up of 90 pods would weigh on those.
	if err := startBurst("no injection", "plain", false); err != nil {
		return err
	}
	// CNI mode: the sidecar's istio-proxy needs Envoy, so only "app running".
	if err := c.InstallIstio(ctx, cluster.CNIMode); err != nil {
		return err
	}
	cniInstalled = true
	if err := ns("cni", true); err != nil {
		return err
	}
	if s, err = c.StartPods(ctx, "cni", n, false, false); err != nil {
		return err
	}
	report("cni (istio-validation + sidecar)", s, c.SandboxTimes("startup-")[base:])
	apiLookups("cni/startup-")
	// The plugin chained for every pod; these it leaves alone.
	if err := startBurst("no injection, istio-cni chained", "plain", false); err != nil {
		return err
	}
	return startBurst("cni", "cni", false)
}

func stat(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	var max time.Duration
	for _, d := range ds {
		if d > max {
			max = d
		}
	}
	return fmt.Sprintf("%d (%d)", cluster.Median(ds).Milliseconds(), max.Milliseconds())
}
