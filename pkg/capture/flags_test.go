package capture

import (
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

func envOf(m map[string]string) Environment {
	return Environment{
		Getenv: func(k string) (string, bool) { v, ok := m[k]; return v, ok },
		LookupGroup: func(name string) (uint32, error) {
			if name == "java" {
				return 202, nil
			}
			return 0, errors.New("no such group")
		},
	}
}

var netipEqual = cmp.Options{
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse(nil, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), *cfg, netipEqual); diff != "" {
		t.Errorf("defaults differ from Istio's (-want +got):\n%s", diff)
	}
}

func TestParseInjectorFlags(t *testing.T) {
	cfg, err := Parse(splitArgs(injector), envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Injector(), *cfg, netipEqual); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParsePrecedenceAndEnv(t *testing.T) {
	tests := []struct {
		name  string
		args  string
		env   map[string]string
		check func(*Config) bool
	}{
		{"flag beats env", "-z 16006", map[string]string{"INBOUND_CAPTURE_PORT": "17006"}, func(c *Config) bool { return c.InboundCapturePort == 16006 }},
		{"env beats default", "", map[string]string{"INBOUND_CAPTURE_PORT": "17006"}, func(c *Config) bool { return c.InboundCapturePort == 17006 }},
		{"long flag", "--inbound-capture-port=18006", nil, func(c *Config) bool { return c.InboundCapturePort == 18006 }},
		{"gid defaults to uids", "-u 5,6", nil, func(c *Config) bool { return cmp.Equal(c.ProxyGIDs, []uint32{5, 6}) }},
		{"gid env", "", map[string]string{"PROXY_UID": "5", "PROXY_GID": "7"}, func(c *Config) bool { return cmp.Equal(c.ProxyGIDs, []uint32{7}) }},
		{"dns first env", "", map[string]string{"REDIRECT_DNS": "true"}, func(c *Config) bool { return c.RedirectDNS }},
		{"dns second env", "", map[string]string{"ISTIO_META_DNS_CAPTURE": "true"}, func(c *Config) bool { return c.RedirectDNS }},
		{"bool flag beats env", "--redirect-dns=false", map[string]string{"REDIRECT_DNS": "true"}, func(c *Config) bool { return !c.RedirectDNS }},
		{"bare bool flag", "--dual-stack", nil, func(c *Config) bool { return c.DualStack }},
		{"invalid drop alias", "", map[string]string{"INVALID_DROP": "1"}, func(c *Config) bool { return c.DropInvalid }},
		{"dual stack alias", "", map[string]string{"ISTIO_DUAL_STACK": "true"}, func(c *Config) bool { return c.DualStack }},
		{"mode lower case is REDIRECT, as in Istio, and said", "-m tproxy", nil, func(c *Config) bool {
			return c.InboundMode == Redirect && len(c.Unapplied) == 1 && strings.Contains(c.Unapplied[0], "-m tproxy")
		}},
		{"mode TPROXY", "-m TPROXY", nil, func(c *Config) bool { return c.InboundMode == TProxy }},
		{"ranges", "-b 8000:8100 -q 9000:9001", nil, func(c *Config) bool {
			return cmp.Equal(c.InboundPorts.Ranges, []ipt.PortRange{{Lo: 8000, Hi: 8100}}) && cmp.Equal(c.OutboundPorts, []ipt.PortRange{{Lo: 9000, Hi: 9001}})
		}},
		{"mixed family exclude", "-x 10.0.0.0/8,fd00::/8", nil, func(c *Config) bool { return len(c.OutboundExcludeCIDR) == 2 }},
		{"cidr masked", "-i 10.1.2.3/8", nil, func(c *Config) bool { return c.OutboundCIDRs.Prefixes[0] == netip.MustParsePrefix("10.0.0.0/8") }},
		{"group names", "", map[string]string{"ISTIO_OUTBOUND_OWNER_GROUPS": "java,101"}, func(c *Config) bool { return cmp.Equal(c.OwnerGroupsInclude, []uint32{202, 101}) }},
		{"groups star", "", map[string]string{"ISTIO_OUTBOUND_OWNER_GROUPS": "*"}, func(c *Config) bool { return c.OwnerGroupsInclude == nil }},
		{"probe timeout", "--probe-timeout 250ms", nil, func(c *Config) bool { return c.ProbeTimeout == 250*time.Millisecond }},
		{"force binary", "--force-iptables-binary legacy", nil, func(c *Config) bool { return c.Backend == ipt.Legacy }},
		{"netns", "--network-namespace /run/netns/x", nil, func(c *Config) bool { return c.NetworkNamespace == "/run/netns/x" }},
		{"loopback", "", map[string]string{"ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR": "127.0.0.1/8"}, func(c *Config) bool { return c.IPv4LoopbackCIDR.Bits() == 8 }},
		{"Istio's CNI mode, accepted and said", "--cni-mode", nil, func(c *Config) bool {
			return len(c.Unapplied) == 1 && strings.Contains(c.Unapplied[0], "--cni-mode")
		}},
		{"CNI_MODE", "", map[string]string{"CNI_MODE": "true"}, func(c *Config) bool { return len(c.Unapplied) == 1 }},
		{"CNI_MODE off", "", map[string]string{"CNI_MODE": "false"}, func(c *Config) bool { return len(c.Unapplied) == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(splitArgs(tt.args), envOf(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(cfg) {
				t.Errorf("unexpected config: %+v", cfg)
			}
		})
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	tests := []struct {
		args string
		env  map[string]string
		want string // the error names the setting and the value
	}{
		{"-p 70000", nil, `flag --envoy-port: "70000"`},
		{"-z 0", nil, `flag --inbound-capture-port: "0"`},
		{"", map[string]string{"INBOUND_CAPTURE_PORT": "x"}, `env INBOUND_CAPTURE_PORT: "x"`},
		{"-i 10.0.0.0/33", nil, `flag --istio-service-cidr: "10.0.0.0/33"`},
		{"-x 10.0.0.0", nil, `flag --istio-service-exclude-cidr: "10.0.0.0"`},
		{"-m FOO", nil, `flag --istio-inbound-interception-mode: "FOO"`},
		{"-u abc", nil, `flag --proxy-uid: "abc"`},
		{"-g 1,-2", nil, `flag --proxy-gid: "-2"`},
		{"-b 9000:8000", nil, `flag --istio-inbound-ports: port range "9000:8000"`},
		{"-d 15020,x", nil, `flag --istio-local-exclude-ports: "x"`},
		{"-c eth0/1", nil, `flag --istio-exclude-interfaces: "eth0/1"`},
		{"-t 99999999999", nil, `flag --istio-inbound-tproxy-mark: "99999999999"`},
		{"-r 254", nil, `flag --istio-inbound-tproxy-route-table: route table 254`},
		{"--probe-timeout 5", nil, `flag --probe-timeout: "5"`},
		{"--dry-run=maybe", nil, `flag --dry-run: "maybe"`},
		{"", map[string]string{"DRY_RUN": "maybe"}, `env DRY_RUN: "maybe"`},
		{"--force-iptables-binary foo", nil, `flag --force-iptables-binary: "foo"`},
		{"", map[string]string{"ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR": "10.0.0.1/32"}, `env ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR: "10.0.0.1/32"`},
		{"", map[string]string{"ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR": "127.0.0.1/4"}, `env ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR: "127.0.0.1/4"`},
		{"", map[string]string{"ISTIO_OUTBOUND_OWNER_GROUPS": "nogroup-xyz"}, `env ISTIO_OUTBOUND_OWNER_GROUPS: unknown group "nogroup-xyz"`},
		{"", map[string]string{"ISTIO_OUTBOUND_OWNER_GROUPS": "1", "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE": "2"}, "only one of"},
		{"--no-such-flag", nil, "unknown flag: --no-such-flag"},
		{"extra", nil, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.args+strings.Join(keys(tt.env), ","), func(t *testing.T) {
			_, err := Parse(splitArgs(tt.args), envOf(tt.env), io.Discard)
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a UsageError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// FuzzParse feeds arbitrary flag and env values through Parse: it must
// either reject them with a UsageError or produce a config that builds and
// renders, never panic.
func FuzzParse(f *testing.F) {
	f.Add("-p", "15001", "ISTIO_SERVICE_CIDR", "*")
	f.Add("-b", "8000:8100,*", "PROXY_UID", "1,2")
	f.Add("-i", "10.0.0.0/33", "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR", "127.0.0.1/8")
	f.Add("--istio-service-exclude-cidr", "fd00::/8,1.2.3.4/32", "ISTIO_LOCAL_EXCLUDE_PORTS", "15020, ,15021")
	f.Add("-m", "TPROXY", "ISTIO_INBOUND_PORTS", "80")
	f.Fuzz(func(t *testing.T, flag, value, envKey, envValue string) {
		cfg, err := Parse([]string{flag, value}, envOf(map[string]string{envKey: envValue}), io.Discard)
		if err != nil {
			return
		}
		cfg.EnableIPv6 = true
		for _, rs := range Build(&cfg.Policy) {
			_ = ipt.Plan(rs, &ipt.State{}, Ownership())
		}
	})
}
