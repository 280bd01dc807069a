package interop

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/capture/capturetest"
	"github.com/skiff-mesh/skiff/pkg/istiobin"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// injector is the command line Istio's sidecar injector gives istio-iptables.
const injector = "-p 15001 -z 15006 -u 1337 -m REDIRECT -i * -x  -b * -d 15090,15021,15020"

// rulesCase is one of the flag sets of Skiff's golden cases
// (pkg/capture/build_test.go), with what the namespace holds.
type rulesCase struct {
	name string
	args string
	env  map[string]string
	// dns4 and dns6 are the nameservers of the namespace's resolv.conf.
	dns4, dns6 []string
	// addrs are the pod's addresses besides loopback, in this order: a run
	// of one family goes on one interface, the next run on a new one.
	// Empty means 10.1.2.3.
	addrs []string
	// differs, when set, names the deliberate difference listed in
	// docs/istio-iptables.md that makes the kernel state differ: the test
	// then logs the difference and fails if there is none.
	differs string
}

var rulesCases = []rulesCase{
	{name: "empty", args: ""},
	{name: "injector", args: injector},
	{name: "injector-ipv6", args: injector, addrs: []string{"fd00::2"}},
	{name: "dns-uid-gid", args: "-u 3,4 -g 1,2 --redirect-dns", dns4: []string{"127.0.0.53"}},
	{name: "dns-uid-gid-ipv6", args: "-u 3,4 -g 1,2 --redirect-dns", dns4: []string{"10.96.0.10"}, dns6: []string{"fd00::a"}, addrs: []string{"fd00::2"}},
	{name: "dns-capture-all", args: injector + " --redirect-dns --capture-all-dns"},
	{name: "dns-env", args: injector, env: map[string]string{"ISTIO_META_DNS_CAPTURE": "true"}, dns4: []string{"10.96.0.10", "10.96.0.11"}},
	{name: "drop-invalid", args: injector + " --drop-invalid"},
	{name: "inbound-ports-include", args: "-b 32000,31000"},
	{name: "inbound-ports-range", args: "-b 8000:8100,9090"},
	{name: "inbound-ports-wildcard", args: "-b * -d 15090,15021"},
	{name: "inbound-ports-tproxy", args: "-m TPROXY -b 32000,31000"},
	// Istio 1.31 compares the mode with "TPROXY" as written: "tproxy" gets
	// REDIRECT rules, and so it does in Skiff (which says so in its log).
	{name: "inbound-ports-wildcard-tproxy", args: "-m tproxy -b * -d 15090"},
	{name: "inbound-ports-wildcard-tproxy-upper", args: "-m TPROXY -b * -d 15090"},
	{name: "tproxy-full", args: "-m TPROXY -b * -i 9.9.0.0/16 -x 1.1.0.0/16 -c not-istio-nic --redirect-dns", dns4: []string{"127.0.0.53"}, addrs: []string{"fd00::2"}},
	{name: "tproxy-mark-table", args: "-m TPROXY -b * -t 4242 -r 77"},
	{name: "outbound-ports-include", args: "-q 32000,31000"},
	{name: "outbound-ports-exclude", args: injector + " -o 3306,5432:5440"},
	{name: "ipnets", args: "-i 10.0.0.0/8,fd00::/8 -x 10.96.0.0/12,fd00:1::/64"},
	{name: "ipnets-ipv6", args: "-i 10.0.0.0/8,fd00::/8 -x 10.96.0.0/12,fd00:1::/64", addrs: []string{"fd00::2"}},
	{name: "exclude-interfaces", args: injector + " -c eth1,not-istio-nic"},
	{name: "kube-virt-interfaces", args: "-i * -k eth1,eth2"},
	{name: "ipnets-with-kube-virt-interfaces", args: "-i 10.0.0.0/8 -k eth1,eth2"},
	{name: "virt-interfaces-no-outbound", args: "-b 4000,5000 -k eth0,eth1"},
	{name: "owner-groups-include", args: injector, env: map[string]string{"ISTIO_OUTBOUND_OWNER_GROUPS": "101,202"}},
	{name: "owner-groups-exclude", args: injector, env: map[string]string{"ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE": "101,202"}},
	{name: "loopback-cidr", args: injector, env: map[string]string{"ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR": "127.0.0.1/8"}},
	{name: "custom-ports", args: "-p 16001 -z 16006 -e 16008 -u 2000 -g 3000 -i * -b *"},
	{name: "env-only", args: "", env: map[string]string{
		"INBOUND_CAPTURE_PORT": "16006", "PROXY_UID": "1500", "ISTIO_INBOUND_PORTS": "*", "ISTIO_SERVICE_CIDR": "*",
		"ISTIO_LOCAL_EXCLUDE_PORTS": "15020", "ISTIO_SERVICE_EXCLUDE_CIDR": "169.254.169.254/32", "ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE": "25",
	}},
	{name: "everything", args: "-u 1337,1338 -g 1337 -i 10.0.0.0/8 -x 10.1.0.0/16 -b 80,443 -q 9000 -o 25 -c eth9 -k veth0 --redirect-dns --drop-invalid", dns4: []string{"10.96.0.10"}, dns6: []string{"fd00::10"}, addrs: []string{"fd00::2"}},
	{name: "dns-no-owner-return-in-nat", args: injector + " --redirect-dns", dns4: []string{"10.96.0.10"}, addrs: []string{"fd00::2"}},
	// No istio-proxy user on the test machines: both fall back to 1337.
	{name: "envoy-user-default", args: "-p 15001 -z 15006 -m REDIRECT -i * -x  -b * -d 15090,15021,15020"},
	{name: "loopback-include-cidr", args: "-u 3,4 -g 1,2 -i 127.1.2.3/32 --redirect-dns", dns4: []string{"127.0.0.53"}},
	{name: "loopback-include-cidr-ipv6", args: "-i 10.0.0.0/8,::1/128 -b *", addrs: []string{"fd00::2"}},
	{name: "ipv6-second-address-no-dual-stack", args: injector, addrs: []string{"10.1.2.3", "fe80::1", "fd00::3"}},
	{name: "ipv6-second-address-dual-stack", args: injector + " --dual-stack", addrs: []string{"10.1.2.3", "fe80::1", "fd00::3"}},
	{name: "ipv6-first-address", args: injector, addrs: []string{"fe80::1", "fd00::3", "10.1.2.3"}},
	{name: "dns-no-nameserver", args: injector + " --redirect-dns", addrs: []string{"fd00::2"}},
	{name: "dns-no-nameserver-uid-gid", args: "-u 3,4 -g 1,2 --redirect-dns"},
}

// splitArgs splits on spaces; an empty field between two spaces is an empty argument.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

// podNS makes a namespace holding rc's addresses and resolv.conf.
func podNS(t *testing.T, rc rulesCase) *netnstest.NS {
	t.Helper()
	ns := netnstest.New(t)
	var conf strings.Builder
	conf.WriteString("search interop.svc.cluster.local svc.cluster.local\n")
	for _, s := range slices.Concat(rc.dns4, rc.dns6) {
		fmt.Fprintf(&conf, "nameserver %s\n", s)
	}
	ns.SetResolvConf(t, conf.String())
	addrs := rc.addrs
	if len(addrs) == 0 {
		addrs = []string{"10.1.2.3"}
	}
	var dev string
	for i, s := range addrs {
		a := netip.MustParseAddr(s)
		if i == 0 || a.Is6() != netip.MustParseAddr(addrs[i-1]).Is6() {
			dev = fmt.Sprintf("pod%d", i)
			ns.Exec(t, "ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
			ns.Exec(t, "ip", "link", "set", dev, "up")
		}
		bits := 24
		args := []string{"addr", "add"}
		if a.Is6() {
			bits = 64
			args = append([]string{"-6"}, args...)
		}
		args = append(args, fmt.Sprintf("%s/%d", a, bits), "dev", dev)
		if a.Is6() {
			args = append(args, "nodad")
		}
		ns.Exec(t, "ip", args...)
	}
	return ns
}

// runIn runs a command inside ns (with its resolv.conf) with only PATH and env.
func runIn(t *testing.T, ns *netnstest.NS, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestIPTablesSameKernelState runs Skiff's istio-iptables and Istio's
// (`pilot-agent istio-iptables`) with the same flags and environment in
// two fresh namespaces with the same addresses and resolv.conf, once per
// iptables backend, and compares what the kernel holds afterwards.
func TestIPTablesSameKernelState(t *testing.T) {
	netnstest.RequireRoot(t)
	istioAgent := istiobin.Path(t, istiobin.PilotAgent)
	skiffIPT := skiff(t, "istio-iptables")
	for _, backend := range []string{"nft", "legacy"} {
		for _, rc := range rulesCases {
			t.Run(backend+"/"+rc.name, func(t *testing.T) {
				t.Parallel()
				env := []string{"FORCE_IPTABLES_BINARY=" + backend}
				for k, v := range rc.env {
					env = append(env, k+"="+v)
				}
				mine, theirs := podNS(t, rc), podNS(t, rc)
				runIn(t, mine, env, skiffIPT, splitArgs(rc.args)...)
				runIn(t, theirs, env, istioAgent, append([]string{"istio-iptables"}, splitArgs(rc.args)...)...)
				got, want := capturetest.Read(t, mine), capturetest.Read(t, theirs)
				capturetest.DropProbeArtefacts(t, want, got)
				capturetest.Compare(t, want, got, rc.differs)
			})
		}
	}
}
