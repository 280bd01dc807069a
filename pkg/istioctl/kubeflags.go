package istioctl

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// Istio's istioctl root flags that choose the cluster and the namespaces
// (istioctl/pkg/cli in Istio). They may come before the command name too:
// Main moves them after it.
const (
	flagKubeconfig     = "kubeconfig"
	flagContext        = "context"
	flagIstioNamespace = "istioNamespace"
	flagNamespace      = "namespace"
)

// defaultIstioNamespace is where istiod runs unless -i says otherwise.
const defaultIstioNamespace = "istio-system"

// rootFlags maps each root flag's long and short names to its long name.
var rootFlags = map[string]string{
	"--" + flagKubeconfig: flagKubeconfig, "-c": flagKubeconfig,
	"--" + flagContext:        flagContext,
	"--" + flagIstioNamespace: flagIstioNamespace, "-i": flagIstioNamespace,
	"--" + flagNamespace: flagNamespace, "-n": flagNamespace,
}

// kubeFlags are the parsed root flags of a command that talks to a cluster.
type kubeFlags struct {
	// Kubeconfig is --kubeconfig/-c (empty: KUBECONFIG, in-cluster, ~/.kube/config).
	Kubeconfig string
	// Context is --context (empty: the kubeconfig's current context).
	Context string
	// IstioNamespace is -i/--istioNamespace: where istiod runs.
	IstioNamespace string
	// Namespace is -n/--namespace (empty: the context's namespace, or default).
	Namespace string
}

// addKubeFlags registers the root flags on a command's flag set. The Istio
// namespace defaults to ISTIOCTL_ISTIONAMESPACE (Istio's istioctl reads its
// settings from ISTIOCTL_* variables), else istio-system.
func addKubeFlags(fs *pflag.FlagSet, env *Env) *kubeFlags {
	k := &kubeFlags{}
	istioNS := defaultIstioNamespace
	if v := env.Getenv("ISTIOCTL_ISTIONAMESPACE"); v != "" {
		istioNS = v
	}
	fs.StringVarP(&k.Kubeconfig, flagKubeconfig, "c", "", "Kubernetes configuration file (env KUBECONFIG)")
	fs.StringVar(&k.Context, flagContext, "", "Kubernetes configuration context")
	fs.StringVarP(&k.IstioNamespace, flagIstioNamespace, "i", istioNS, "Istio system namespace")
	fs.StringVarP(&k.Namespace, flagNamespace, "n", "", "Kubernetes namespace (default: the context's, else default)")
	return k
}

// hoistRootFlags moves root flags written before the command name
// ("istioctl -c F proxy-status") after it, so the command's flag set parses
// them (before its own arguments, so a "--" among those stays last). It
// returns the command name and its arguments.
func hoistRootFlags(args []string) (string, []string, error) {
	var lead []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" && args[0] != "--" {
		a := args[0]
		name, _, inline := strings.Cut(a, "=")
		if !inline && !strings.HasPrefix(a, "--") && len(a) > 2 {
			name, inline = a[:2], true // -cFILE
		}
		if _, ok := rootFlags[name]; !ok {
			return "", nil, fmt.Errorf("unknown flag %s before the command", name)
		}
		if inline {
			lead, args = append(lead, a), args[1:]
			continue
		}
		if len(args) < 2 {
			return "", nil, fmt.Errorf("flag %s needs a value", a)
		}
		lead, args = append(lead, args[0], args[1]), args[2:]
	}
	if len(args) == 0 {
		return "", nil, fmt.Errorf("no command after %s", strings.Join(lead, " "))
	}
	return args[0], append(lead, args[1:]...), nil
}
