// Command cni-plugin is Skiff's chained CNI plugin (Istio's istio-cni): it
// installs a pod's traffic capture rules at network setup.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/skiff-mesh/skiff/pkg/cni"
)

func main() {
	p := &cni.Plugin{Stdout: os.Stdout, Stderr: os.Stderr}
	skel.PluginMainFuncs(p.Funcs(), cni.Versions(), "Skiff istio-cni plugin")
}
