// Command cluster is `make demo-cluster`: a real single node (kubelet,
// containerd, CoreDNS) in a private namespace, Skiff's images imported,
// Skiff installed with helm the way Istio is, the demo mesh deployed in a
// namespace labelled istio-injection=enabled, and what a user would look
// at printed step by step; then helm uninstall and proof that nothing is
// left. Ctrl-C tears everything down.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/skiff-mesh/skiff/pkg/kubenode"
	"github.com/skiff-mesh/skiff/test/cluster"
)

func main() {
	root := flag.String("root", ".", "the repository root (charts and binaries)")
	mode := flag.String("mode", "both", "interception: istio-init, cni (the istio-cni DaemonSet), or both, one after the other")
	keep := flag.Bool("keep", false, "after the checks, keep the cluster until Ctrl-C (kubeconfig printed) instead of uninstalling")
	flag.Parse()
	var modes []cluster.Mode
	switch *mode {
	case "both":
		modes = []cluster.Mode{cluster.InitMode, cluster.CNIMode}
	case "cni":
		modes = []cluster.Mode{cluster.CNIMode}
	case "istio-init":
		modes = []cluster.Mode{cluster.InitMode}
	default:
		fmt.Fprintf(os.Stderr, "demo-cluster: -mode %q: want istio-init, cni or both\n", *mode)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *root, modes, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo-cluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string, modes []cluster.Mode, keep bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	say("building Skiff's images (make images)")
	tars, err := cluster.BuildImages(ctx, filepath.Join(root, "bin", "images"), nil)
	if err != nil {
		return err
	}
	say("starting a node: etcd, kube-apiserver, controller-manager, scheduler, kubelet, containerd, kube-proxy, CoreDNS")
	start := time.Now()
	n, err := kubenode.StartNode(ctx, kubenode.Options{Images: tars, Hosts: []kubenode.HostEntry{cluster.ExternalHost}})
	if err != nil {
		return err
	}
	defer func() {
		say("tearing the node down")
		n.Stop()
	}()
	fmt.Printf("node %s Ready in %s; kubeconfig %s\n", n.Name, time.Since(start).Round(time.Millisecond), n.Kubeconfig)
	c, err := cluster.New(n, root, os.Stdout)
	if err != nil {
		return err
	}
	for i, mode := range modes {
		for _, s := range cluster.Steps(mode) {
			if keep && i == len(modes)-1 && s.Name == "uninstall" {
				say("the cluster stays up: KUBECONFIG=%s; Ctrl-C ends it", n.Kubeconfig)
				<-ctx.Done()
				return nil
			}
			say("%s: %s", mode, s.Name)
			if err := s.Run(c, ctx); err != nil {
				return fmt.Errorf("%s: %s: %w", mode, s.Name, err)
			}
		}
	}
	say("done: everything worked")
	return nil
}

func say(format string, args ...any) { fmt.Printf("\n\033[1m=== "+format+"\033[0m\n", args...) }
