package compat

import (
	"bytes"
	"fmt"
	"strings"
)

// Markdown renders the table as docs/compatibility.md.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`# Compatibility: what Istio hands each binary

Generated from ` + "`pkg/compat`" + ` (` + "`go test ./pkg/compat -run Golden -update`" + `); do not edit by hand.

Every argument and environment variable that Istio's own charts and injection templates pass
(Istio 1.28 to 1.31: the istiod chart's Deployment, the istio-cni chart's DaemonSet and
ConfigMap, and the sidecar, gateway, grpc-agent and grpc-simple templates), and every
variable Istio's pilot-agent registers (which users set in the environment or the mesh's
proxyMetadata), per binary, with what Skiff does with it:

- **applied**: Skiff does what Istio does with it (for GOMAXPROCS and the like, the Go runtime does);
- **partly**: applied, with the limit the note gives;
- **accepted, not applied**: taken without error; the binary names it once in its log at start
  (pilot-agent also when it comes in proxyMetadata) and otherwise ignores it;
- **not Skiff's**: set on the application's container for grpc-go or the app.

No binary exits on an argument from this list. ` + "`pkg/compat`" + `'s tests read Istio 1.31's files
from the Go module cache (` + "`go mod download -json istio.io/istio@...`" + `) and fail when those files pass
a name this table lacks, or when Istio's pilot-agent or istiod source registers a variable it does
not account for, and parse every listed argument with the binary's own parser. Istio
1.28 to 1.30 are not served by the module proxy here; their names were read from Istio's
release branches and are marked where they differ.
`)
	for _, bin := range Binaries {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n| name | Skiff | what Skiff does |\n|---|---|---|\n", bin, about[bin])
		for _, flags := range []bool{true, false} {
			for _, e := range table {
				if e.Binary != bin || e.IsFlag() != flags {
					continue
				}
				note := e.Note
				if e.Istio != "" {
					note += " (Istio " + e.Istio + " only.)"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Name, e.Use, strings.ReplaceAll(note, "|", `\|`))
			}
		}
		if names := unread[bin]; len(names) > 0 {
			fmt.Fprintf(&b, "\nAlso accepted, not applied: the %d other variables Istio's %s registers, which Skiff's does not read: `%s`.\n",
				len(names), bin, strings.Join(names, "`, `"))
		}
	}
	return b.Bytes()
}

// about introduces each binary's section.
var about = map[Binary]string{
	PilotDiscovery: "istiod's container: the istiod chart's Deployment (`discovery` and its args, env).",
	PilotAgent:     "The istio-proxy container of the sidecar, gateway and grpc-agent templates (`proxy sidecar|router`, and the `wait` and `request` hooks).",
	IstioIptables:  "istio-init (and istio-validation in CNI mode): `pilot-agent istio-iptables` with the sidecar template's args; its env is the mesh's proxyMetadata only.",
	InstallCNI:     "The istio-cni DaemonSet's container: its env and the `istio-cni-config` ConfigMap it reads as env.",
	App:            "Variables the grpc-agent and grpc-simple templates set on the application's containers.",
}
