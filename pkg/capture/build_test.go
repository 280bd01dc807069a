package capture

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenCase is a flag combination, as istio-iptables would receive it.
type goldenCase struct {
	name string
	args string
	env  map[string]string
	// users is the user database ENVOY_USER is looked up in.
	users map[string]uint32
	// Set what Run would find in the namespace.
	dns4, dns6 []string
	ipv6       bool
	// addrs, when set, are the pod's interface addresses in the kernel's
	// order, and decide IPv6 as Istio does (PodIPv6) instead of ipv6.
	addrs []string
}

var injector = "-p 15001 -z 15006 -u 1337 -m REDIRECT -i * -x  -b * -d 15090,15021,15020"

var goldenCases = []goldenCase{
	{name: "empty", args: ""},
	{name: "injector", args: injector},
	{name: "injector-ipv6", args: injector, ipv6: true},
	{name: "dns-uid-gid", args: "-u 3,4 -g 1,2 --redirect-dns", dns4: []string{"127.0.0.53"}},
	{name: "dns-uid-gid-ipv6", args: "-u 3,4 -g 1,2 --redirect-dns", dns4: []string{"10.96.0.10"}, dns6: []string{"fd00::a"}, ipv6: true},
	{name: "dns-capture-all", args: injector + " --redirect-dns --capture-all-dns"},
	{name: "dns-env", args: injector, env: map[string]string{"ISTIO_META_DNS_CAPTURE": "true"}, dns4: []string{"10.96.0.10", "10.96.0.11"}},
	{name: "drop-invalid", args: injector + " --drop-invalid"},
	{name: "inbound-ports-include", args: "-b 32000,31000"},
	{name: "inbound-ports-range", args: "-b 8000:8100,9090"},
	{name: "inbound-ports-wildcard", args: "-b * -d 15090,15021"},
	{name: "inbound-ports-tproxy", args: "-m TPROXY -b 32000,31000"},
	{name: "inbound-ports-wildcard-tproxy", args: "-m TPROXY -b * -d 15090"},
	{name: "tproxy-full", args: "-m TPROXY -b * -i 9.9.0.0/16 -x 1.1.0.0/16 -c not-istio-nic --redirect-dns", dns4: []string{"127.0.0.53"}, ipv6: true},
	{name: "tproxy-mark-table", args: "-m TPROXY -b * -t 4242 -r 77"},
	{name: "outbound-ports-include", args: "-q 32000,31000"},
	{name: "outbound-ports-exclude", args: injector + " -o 3306,5432:5440"},
	{name: "ipnets", args: "-i 10.0.0.0/8,fd00::/8 -x 10.96.0.0/12,fd00:1::/64"},
	{name: "ipnets-ipv6", args: "-i 10.0.0.0/8,fd00::/8 -x 10.96.0.0/12,fd00:1::/64", ipv6: true},
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
	{name: "everything", args: "-u 1337,1338 -g 1337 -i 10.0.0.0/8 -x 10.1.0.0/16 -b 80,443 -q 9000 -o 25 -c eth9 -k veth0 --redirect-dns --drop-invalid", dns4: []string{"10.96.0.10"}, ipv6: true, dns6: []string{"fd00::10"}},
	// The situations where Skiff's rules once differed from Istio 1.31's.
	// With DNS capture nat ISTIO_OUTPUT_DNS holds only the REDIRECTs (the
	// proxy's own traffic has returned in ISTIO_OUTPUT), and a family with
	// no nameserver has neither the chain nor the jump to it.
	{name: "dns-no-owner-return-in-nat", args: injector + " --redirect-dns", dns4: []string{"10.96.0.10"}, ipv6: true},
	// Without -u the proxy uid (and so the gid) is ENVOY_USER's uid.
	{name: "envoy-user-uid", args: "-i * -b *", env: map[string]string{"ENVOY_USER": "envoy"}, users: map[string]uint32{"envoy": 101, "istio-proxy": 1234}},
	{name: "envoy-user-default-istio-proxy", args: "-p 15001 -z 15006 -m REDIRECT -i * -x  -b * -d 15090,15021,15020", users: map[string]uint32{"istio-proxy": 1234}},
	// A captured loopback destination: no app-to-app loopback RETURNs, in either family.
	{name: "loopback-include-cidr", args: "-u 3,4 -g 1,2 -i 127.1.2.3/32 --redirect-dns", dns4: []string{"127.0.0.53"}},
	{name: "loopback-include-cidr-ipv6", args: "-i 10.0.0.0/8,::1/128 -b *", ipv6: true},
	// IPv6 only when the pod's first address is IPv6, or with dual stack.
	{name: "ipv6-second-address-no-dual-stack", args: injector, addrs: []string{"127.0.0.1", "::1", "10.1.2.3", "fe80::1", "fd00::3"}},
	{name: "ipv6-second-address-dual-stack", args: injector + " --dual-stack", addrs: []string{"127.0.0.1", "::1", "10.1.2.3", "fe80::1", "fd00::3"}},
	{name: "ipv6-first-address", args: injector, addrs: []string{"127.0.0.1", "::1", "fe80::1", "fd00::3", "10.1.2.3"}},
}

// buildOnlyCases are golden cases that TestGoldenRulesApply cannot apply:
// Run would read the test machine's resolv.conf for them.
var buildOnlyCases = []goldenCase{
	// DNS capture with no nameserver captures no DNS at all, as in Istio:
	// no ISTIO_OUTPUT_DNS, no port 53 exceptions, no raw table.
	{name: "dns-no-nameserver", args: injector + " --redirect-dns", ipv6: true},
	{name: "dns-no-nameserver-uid-gid", args: "-u 3,4 -g 1,2 --redirect-dns"},
}

func (gc goldenCase) config(t testing.TB) *Config {
	t.Helper()
	env := Environment{
		Getenv: func(k string) (string, bool) { v, ok := gc.env[k]; return v, ok },
		LookupUser: func(name string) (uint32, error) {
			if uid, ok := gc.users[name]; ok {
				return uid, nil
			}
			return 0, fmt.Errorf("unknown user %q", name)
		},
	}
	cfg, err := Parse(splitArgs(gc.args), env, io.Discard)
	if err != nil {
		t.Fatalf("%s: %v", gc.name, err)
	}
	for _, s := range gc.dns4 {
		cfg.DNSServersV4 = append(cfg.DNSServersV4, netip.MustParseAddr(s))
	}
	for _, s := range gc.dns6 {
		cfg.DNSServersV6 = append(cfg.DNSServersV6, netip.MustParseAddr(s))
	}
	cfg.EnableIPv6 = gc.ipv6
	if gc.addrs != nil {
		var addrs []netip.Addr
		for _, a := range gc.addrs {
			addrs = append(addrs, netip.MustParseAddr(a))
		}
		cfg.EnableIPv6 = PodIPv6(addrs, cfg.DualStack)
	}
	return cfg
}

// splitArgs splits on spaces; an empty field between two spaces is an empty argument.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

// describe renders the typed rulesets: every rule with its family, table,
// chain, placement and purpose.
func describe(sets []*ipt.Ruleset) string {
	var b strings.Builder
	for _, rs := range sets {
		fmt.Fprintf(&b, "family %s\n", rs.Family)
		for _, c := range rs.Chains {
			fmt.Fprintf(&b, "  chain %s/%s\n", c.Table, c.Chain)
		}
		for _, r := range rs.Rules {
			place := "append"
			if r.Head {
				place = "head"
			}
			fmt.Fprintf(&b, "  %s/%s %s: %s  # %s\n", r.Table, r.Chain, place, r.Spec(), r.Purpose)
		}
	}
	return b.String()
}

func restoreText(sets []*ipt.Ruleset) string {
	var b strings.Builder
	for _, rs := range sets {
		fmt.Fprintf(&b, "# %s\n%s", rs.Family, ipt.Plan(rs, &ipt.State{}, Ownership()))
	}
	return b.String()
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestBuildGolden(t *testing.T) {
	if len(goldenCases) < 25 {
		t.Fatalf("want at least 25 golden cases, have %d", len(goldenCases))
	}
	for _, gc := range slices.Concat(goldenCases, buildOnlyCases) {
		t.Run(gc.name, func(t *testing.T) {
			sets := Build(&gc.config(t).Policy)
			checkGolden(t, filepath.Join("testdata", gc.name+".rules.golden"), describe(sets))
			checkGolden(t, filepath.Join("testdata", gc.name+".restore.golden"), restoreText(sets))
		})
	}
}

// TestPodIPv6 checks Istio's rule for programming IPv6 from the pod's
// interface addresses, in the kernel's order.
func TestPodIPv6(t *testing.T) {
	for _, tc := range []struct {
		name      string
		addrs     []string
		dualStack bool
		want      bool
	}{
		{"none", nil, false, false},
		{"loopback only", []string{"127.0.0.1", "::1"}, false, false},
		{"ipv4 only", []string{"127.0.0.1", "::1", "10.1.2.3"}, false, false},
		{"ipv6 only", []string{"127.0.0.1", "::1", "fd00::3"}, false, true},
		{"ipv4 first", []string{"10.1.2.3", "fd00::3"}, false, false},
		{"ipv4 first, dual stack", []string{"10.1.2.3", "fd00::3"}, true, true},
		{"ipv6 first", []string{"fd00::3", "10.1.2.3"}, false, true},
		{"link-local skipped", []string{"fe80::1", "169.254.1.1", "10.1.2.3"}, false, false},
		{"passthrough ::6 skipped", []string{"127.0.0.1", "::1", "::6", "10.1.2.3"}, false, false},
		{"mapped ipv4", []string{"::ffff:10.1.2.3", "fd00::3"}, false, false},
		{"dual stack without ipv6", []string{"10.1.2.3", "10.1.2.4"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addrs []netip.Addr
			for _, a := range tc.addrs {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			if got := PodIPv6(addrs, tc.dualStack); got != tc.want {
				t.Errorf("PodIPv6(%v, %v) = %v, want %v", tc.addrs, tc.dualStack, got, tc.want)
			}
		})
	}
}

// TestEnvoyUser checks where the proxy uid and gid come from when -u is not
// given: the uid of the user ENVOY_USER names (istio-proxy by default), else 1337.
func TestEnvoyUser(t *testing.T) {
	users := map[string]uint32{"istio-proxy": 1234, "envoy": 101}
	for _, tc := range []struct {
		name     string
		args     string
		env      map[string]string
		users    map[string]uint32
		uid, gid []uint32
	}{
		{"no user database", "", nil, nil, []uint32{1337}, []uint32{1337}},
		{"istio-proxy exists", "", nil, users, []uint32{1234}, []uint32{1234}},
		{"ENVOY_USER", "", map[string]string{"ENVOY_USER": "envoy"}, users, []uint32{101}, []uint32{101}},
		{"ENVOY_USER unknown", "", map[string]string{"ENVOY_USER": "nobody-here"}, users, []uint32{1337}, []uint32{1337}},
		{"ENVOY_USER empty", "", map[string]string{"ENVOY_USER": ""}, users, []uint32{1337}, []uint32{1337}},
		{"-u wins", "-u 7", map[string]string{"ENVOY_USER": "envoy"}, users, []uint32{7}, []uint32{7}},
		{"PROXY_UID wins", "", map[string]string{"ENVOY_USER": "envoy", "PROXY_UID": "8"}, users, []uint32{8}, []uint32{8}},
		{"empty -u looks up", "-u ", map[string]string{"ENVOY_USER": "envoy"}, users, []uint32{101}, []uint32{101}},
		{"-g kept", "-g 9", nil, users, []uint32{1234}, []uint32{9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gc := goldenCase{name: tc.name, args: tc.args, env: tc.env, users: tc.users}
			cfg := gc.config(t)
			if diff := cmp.Diff(tc.uid, cfg.ProxyUIDs); diff != "" {
				t.Errorf("uids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.gid, cfg.ProxyGIDs); diff != "" {
				t.Errorf("gids (-want +got):\n%s", diff)
			}
		})
	}
}
