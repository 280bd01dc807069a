package interop

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/capture/capturetest"
	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

var (
	nftHandle  = regexp.MustCompile(` # handle \d+`)
	nftCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)
)

// nftState is the namespace's whole nftables ruleset (handles and counter
// values stripped, so `counter` itself is compared) followed by policy
// routing, routes and loopback addresses.
func nftState(t *testing.T, ns *netnstest.NS) string {
	t.Helper()
	out := ns.Exec(t, "nft", "-a", "list", "ruleset")
	out = nftHandle.ReplaceAllString(out, "")
	out = nftCounter.ReplaceAllString(out, "counter")
	var b strings.Builder
	b.WriteString("== nft list ruleset\n" + out)
	for _, args := range [][]string{
		{"-4", "rule", "show"}, {"-6", "rule", "show"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-o", "addr", "show", "dev", "lo"},
	} {
		fmt.Fprintf(&b, "== ip %s\n%s", strings.Join(args, " "), ns.Exec(t, "ip", args...))
	}
	return b.String()
}

// nftCases are flag sets beyond the golden ones where the native layout's
// order depends on how both families' rules interleave.
var nftCases = []rulesCase{
	{name: "nft-virt-interfaces-dual-stack", args: "-i 10.0.0.0/8,fd00::/8 -k eth1,eth2", addrs: []string{"fd00::2"}},
	{name: "nft-tproxy-dual-stack-ports", args: "-m TPROXY -b 80,443 -x 10.9.0.0/16,fd00:9::/32", addrs: []string{"fd00::2"}},
	{name: "nft-dns-two-servers-dual-stack", args: injector + " --redirect-dns", dns4: []string{"10.96.0.10", "10.96.0.11"}, dns6: []string{"fd00::a", "fd00::b"}, addrs: []string{"fd00::2"}},
}

// nftDifference is a deliberate difference (docs/istio-iptables.md,
// "Native nftables") that makes a case's native state differ from Istio's.
type nftDifference struct {
	why string
	// istioFails: Istio's run fails; Skiff's must succeed.
	istioFails bool
	// skiffOnly matches the lines only Skiff's state has: the states must
	// be equal without them, and Skiff's must have at least one.
	skiffOnly *regexp.Regexp
}

// tproxyDrop is the rule after each tproxy rule that drops what no proxy
// socket took.
var tproxyDrop = nftDifference{
	why:       "TPROXY without a proxy socket drops, as iptables' TPROXY does",
	skiffOnly: regexp.MustCompile(`(?m)^\t\tmeta l4proto tcp ip6? daddr != (127\.0\.0\.1|::1) counter drop\n`),
}

// portRange: Istio 1.31 passes iptables' "a:b" port ranges to nft, which
// rejects them, so its run fails.
var portRange = nftDifference{why: "port ranges work", istioFails: true}

var nftDiffers = map[string]nftDifference{
	"inbound-ports-range":                 portRange,
	"outbound-ports-exclude":              portRange,
	"inbound-ports-tproxy":                tproxyDrop,
	"inbound-ports-wildcard-tproxy-upper": tproxyDrop,
	"tproxy-full":                         tproxyDrop,
	"tproxy-mark-table":                   tproxyDrop,
	"nft-tproxy-dual-stack-ports":         tproxyDrop,
}

// TestNativeNFTablesSameKernelState runs Skiff's istio-iptables and
// Istio's with --native-nftables and the flags of every golden case in two
// fresh namespaces, and compares the nftables ruleset and routing they
// leave.
func TestNativeNFTablesSameKernelState(t *testing.T) {
	netnstest.RequireRoot(t)
	istioAgent := istiobin.Path(t, istiobin.PilotAgent)
	skiffIPT := skiff(t, "istio-iptables")
	for _, rc := range slices.Concat(rulesCases, nftCases) {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			var env []string
			for k, v := range rc.env {
				env = append(env, k+"="+v)
			}
			args := append(splitArgs(rc.args), "--native-nftables")
			mine, theirs := podNS(t, rc), podNS(t, rc)
			runIn(t, mine, env, skiffIPT, args...)
			d, differs := nftDiffers[rc.name]
			if d.istioFails {
				cmd := exec.Command("ip", append([]string{"netns", "exec", theirs.Name, istioAgent, "istio-iptables"}, args...)...)
				cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
				out, err := cmd.CombinedOutput()
				if err == nil {
					t.Fatalf("documented difference %q is gone: Istio's run succeeded", d.why)
				}
				t.Logf("deliberate difference (%s): Istio's run fails (%v):\n%s", d.why, err, out)
				return
			}
			runIn(t, theirs, env, istioAgent, append([]string{"istio-iptables"}, args...)...)
			got, want := nftState(t, mine), nftState(t, theirs)
			// With IPv6 off (Istio programs no IPv6 rule), Skiff guards its
			// rules that match no address with the family, so that IPv6
			// passes untouched, as with iptables; Istio's catch IPv6 too.
			if guarded, had := capturetest.WithoutIPv4Guard(got); had {
				if strings.Contains(want, "ip6 ") {
					t.Errorf("dual-stack rules carry a family guard:\n%s", got)
				}
				got = guarded
			}
			if differs {
				stripped := d.skiffOnly.ReplaceAllString(got, "")
				if stripped == got {
					t.Errorf("documented difference %q is gone: Skiff's state has none of its lines", d.why)
				}
				t.Logf("deliberate difference (%s) (-istio +skiff):\n%s", d.why, cmp.Diff(want, got))
				got = stripped
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("nftables state differs from Istio's (-istio +skiff):\n%s", diff)
			}
		})
	}
}

// TestNativeNFTablesCrossCleanup installs native rules with one tool and
// removes them with the other's --native-nftables --cleanup-only: the
// namespace must end as it does when the remover had installed them
// itself, with no istio-proxy table left.
func TestNativeNFTablesCrossCleanup(t *testing.T) {
	netnstest.RequireRoot(t)
	tools, byName := crossTools(t)
	for _, name := range cleanupCases {
		rc := byName[name]
		for _, pair := range [][2]string{{"istio", "skiff"}, {"skiff", "istio"}} {
			installer, remover := pair[0], pair[1]
			t.Run(name+"/"+installer+"-then-"+remover, func(t *testing.T) {
				t.Parallel()
				var env []string
				for k, v := range rc.env {
					env = append(env, k+"="+v)
				}
				run := func(ns *netnstest.NS, tool string, args ...string) {
					cmd := tools[tool]
					runIn(t, ns, env, cmd[0], append(cmd[1:], args...)...)
				}
				args := append(splitArgs(rc.args), "--native-nftables")
				cleanup := append(slices.Clone(args), "--cleanup-only")
				cross, self := podNS(t, rc), podNS(t, rc)
				run(cross, installer, args...)
				run(cross, remover, cleanup...)
				run(self, remover, args...)
				run(self, remover, cleanup...)
				got, want := nftState(t, cross), nftState(t, self)
				if strings.Contains(got, "istio-proxy") {
					t.Errorf("%s's --cleanup-only left %s's tables:\n%s", remover, installer, got)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("after %s installed and %s cleaned up (-%s alone +cross):\n%s", installer, remover, remover, d)
				}
			})
		}
	}
}
