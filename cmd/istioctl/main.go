// Command istioctl is Skiff's istioctl: kube-inject adds the sidecar to
// Kubernetes YAML offline, with the same injector as istiod's webhook;
// proxy-status and proxy-config read istiod and the agents through the
// Kubernetes API server (--kubeconfig, --context, -i), or at --istiod and
// --agent addresses.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skiff-mesh/skiff/pkg/istioctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := istioctl.Main(ctx, os.Args[1:], &istioctl.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
