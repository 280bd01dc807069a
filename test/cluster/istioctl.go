package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istioctl"
	"github.com/skiff-mesh/skiff/pkg/istiod"
)

// Istioctl runs Skiff's istioctl as a user would, with --kubeconfig: it
// reaches istiod and the agents by port-forwarding through the API server.
func (c *Cluster) Istioctl(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	args = append(args, "--kubeconfig", c.Node.Kubeconfig)
	code := istioctl.Main(ctx, args, &istioctl.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	fmt.Fprintf(c.log, "$ istioctl %s\n", strings.Join(args, " "))
	if code != istioctl.ExitOK {
		return out.String(), fmt.Errorf("istioctl %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// CheckProxyStatus runs istioctl proxy-status: every proxy of the demo
// whose agent talks to istiod is listed, SYNCED for what it asked for.
func (c *Cluster) CheckProxyStatus(ctx context.Context) error {
	var out string
	var missing []string
	// The proxies' ACKs reach istiod just after they connect.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := kubePoll(ctx, "proxy-status listing every proxyless pod SYNCED", func() (bool, error) {
		var err error
		if out, err = c.Istioctl(ctx, "proxy-status"); err != nil {
			return false, err
		}
		missing = missing[:0]
		for _, sel := range []string{"app=reviews", "app=client"} {
			pods, err := c.Pods(ctx, DemoNamespace, sel)
			if err != nil {
				return false, err
			}
			for _, p := range pods {
				if !synced(out, p.Name+"."+DemoNamespace) {
					missing = append(missing, p.Name)
				}
			}
		}
		return len(missing) == 0, nil
	})
	c.Say("istioctl proxy-status (through the API server):\n%s", out)
	if err != nil {
		return fmt.Errorf("%w: not SYNCED: %v", err, missing)
	}
	return nil
}

// synced reports whether the proxy's row says SYNCED for what it asked
// for (a proxyless server asks for listeners only; the rest is NOT SENT)
// and STALE for nothing.
func synced(table, proxy string) bool {
	for _, l := range Lines(table) {
		f := strings.Fields(l)
		if len(f) > 3 && f[0] == proxy {
			return strings.Contains(l, "SYNCED") && !strings.Contains(l, "STALE")
		}
	}
	return false
}

// CheckProxySecret runs istioctl proxy-config secret for the client (the
// agent's certificates, read through a port-forward to the pod) and
// proxy-config listeners (istiod's view of the app's own stream).
func (c *Cluster) CheckProxySecret(ctx context.Context) error {
	pod, err := c.OnePod(ctx, "client")
	if err != nil {
		return err
	}
	out, err := c.Istioctl(ctx, "proxy-config", "secret", pod.Name+"."+DemoNamespace)
	if err != nil {
		return err
	}
	c.Say("istioctl proxy-config secret %s.%s:\n%s", pod.Name, DemoNamespace, out)
	if !strings.Contains(out, "default") || !strings.Contains(out, "ROOTCA") {
		return errors.New("proxy-config secret lists no default and ROOTCA secrets")
	}
	// The client's own stream (its gRPC xDS client's listener), not the
	// agent's NameTable stream under the same proxy ID.
	out, err = c.Istioctl(ctx, "proxy-config", "listeners", pod.Name+"."+DemoNamespace)
	if err != nil {
		return err
	}
	c.Say("istioctl proxy-config listeners %s.%s:\n%s", pod.Name, DemoNamespace, out)
	if !strings.Contains(out, "reviews.demo.svc.cluster.local") {
		return errors.New("proxy-config listeners does not show the client's listener for reviews")
	}
	return nil
}

// CheckIstioVersionCommand runs Istio's own istioctl (the binary at
// istioctl) version against the cluster: it reads each istiod pod's
// version from its monitoring port, through the API server, and must
// print the control plane's. Skiff's istioctl version must print it too,
// and the proxies'.
func (c *Cluster) CheckIstioVersionCommand(ctx context.Context, istioctl string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, istioctl, "version", "--kubeconfig", c.Node.Kubeconfig, "-i", "istio-system")
	out, err := cmd.CombinedOutput()
	c.Say("Istio's istioctl version:\n%s", out)
	if err != nil {
		return fmt.Errorf("Istio's istioctl version: %w", err)
	}
	if want := "control plane version: " + istiod.IstioVersion; !strings.Contains(string(out), want) {
		return fmt.Errorf("Istio's istioctl version does not say %q", want)
	}
	// Skiff's, the same way.
	mine, err := c.Istioctl(ctx, "version")
	c.Say("istioctl version:\n%s", mine)
	if err != nil {
		return err
	}
	for _, want := range []string{"control plane version: " + istiod.IstioVersion, "data plane version: " + istiod.IstioVersion + " ("} {
		if !strings.Contains(mine, want) {
			return fmt.Errorf("istioctl version does not say %q", want)
		}
	}
	return nil
}
