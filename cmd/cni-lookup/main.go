// Command cni-lookup is the CNI plugin's helper, installed beside it as
// istio-cni-lookup: it reads one pod from the Kubernetes API server with
// the plugin's kubeconfig and prints it as JSON, for the plugin to decide
// on when the node agent's pod cache cannot answer. Its exit code is 0
// with the pod, cni.ExitKubeconfig when the kubeconfig cannot be used, and
// 1 otherwise, with the reason on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/cni/kubeapi"
)

func main() {
	l, err := cni.ParseLookup(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cni.LookupBinary, err)
		os.Exit(1)
	}
	pod, err := kubeapi.Lookup(context.Background(), l)
	var kerr *cni.KubeconfigError
	switch {
	case errors.As(err, &kerr):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(cni.ExitKubeconfig)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(pod); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
