package capture

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/logflags"
)

// UsageError is a bad flag or env value: the command exits with code 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Environment is what Parse reads besides the command line.
type Environment struct {
	// Getenv looks up an environment variable.
	Getenv func(string) (string, bool)
	// LookupGroup resolves a group name to its gid.
	LookupGroup func(string) (uint32, error)
	// LookupUser resolves a user name to its uid; nil knows no users.
	LookupUser func(string) (uint32, error)
}

// OSEnvironment reads the process environment and the system's user and
// group databases.
func OSEnvironment() Environment {
	return Environment{
		Getenv: os.LookupEnv,
		LookupGroup: func(name string) (uint32, error) {
			g, err := user.LookupGroup(name)
			if err != nil {
				return 0, err
			}
			n, err := strconv.ParseUint(g.Gid, 10, 32)
			return uint32(n), err
		},
		LookupUser: func(name string) (uint32, error) {
			u, err := user.Lookup(name)
			if err != nil {
				return 0, err
			}
			n, err := strconv.ParseUint(u.Uid, 10, 32)
			return uint32(n), err
		},
	}
}

// defaultProxyUID is the proxy uid when neither -u nor the user ENVOY_USER names gives one.
const defaultProxyUID = 1337

// envoyUserUID is Istio's proxy uid when -u and PROXY_UID are empty: the uid
// of the user named by ENVOY_USER (default istio-proxy), or 1337 when there
// is no such user.
func (e Environment) envoyUserUID() uint32 {
	name, ok := e.lookup("ENVOY_USER")
	if !ok {
		name = "istio-proxy"
	}
	if e.LookupUser == nil || name == "" {
		return defaultProxyUID
	}
	uid, err := e.LookupUser(name)
	if err != nil {
		return defaultProxyUID
	}
	return uid
}

// option is one istio-iptables setting: its flag, env vars, default, and how it sets the Config.
type option struct {
	long, short string
	envs        []string
	def         string
	usage       string
	boolean     bool
	set         func(c *Config, env Environment, v string) error
}

func portOpt(dst func(*Config) *uint16) func(*Config, Environment, string) error {
	return func(c *Config, _ Environment, v string) (err error) {
		*dst(c), err = parsePort(v)
		return err
	}
}

func boolOpt(dst func(*Config) *bool) func(*Config, Environment, string) error {
	return func(c *Config, _ Environment, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a boolean", v)
		}
		*dst(c) = b
		return nil
	}
}

func rangesOpt(dst func(*Config) *[]ipt.PortRange) func(*Config, Environment, string) error {
	return func(c *Config, _ Environment, v string) (err error) {
		*dst(c), err = ParsePortList(v)
		return err
	}
}

func ifacesOpt(dst func(*Config) *[]string) func(*Config, Environment, string) error {
	return func(c *Config, _ Environment, v string) (err error) {
		*dst(c), err = ParseInterfaces(v)
		return err
	}
}

func uint32Opt(dst func(*Config) *uint32, what string) func(*Config, Environment, string) error {
	return func(c *Config, _ Environment, v string) error {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a %s", v, what)
		}
		*dst(c) = uint32(n)
		return nil
	}
}

// groupsOpt reads an owner-group list: "*" (everyone, the default) or names and gids.
func groupsOpt(dst func(*Config) *[]uint32) func(*Config, Environment, string) error {
	return func(c *Config, env Environment, v string) error {
		*dst(c) = nil
		if strings.TrimSpace(v) == "*" {
			return nil
		}
		for _, g := range splitList(v) {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				*dst(c) = append(*dst(c), uint32(n))
				continue
			}
			if env.LookupGroup == nil {
				return fmt.Errorf("group %q: no group database", g)
			}
			n, err := env.LookupGroup(g)
			if err != nil {
				return fmt.Errorf("unknown group %q", g)
			}
			*dst(c) = append(*dst(c), n)
		}
		return nil
	}
}

// options lists every istio-iptables setting, with Istio's names and defaults.
var options = []option{
	{long: "envoy-port", short: "p", def: "15001", usage: "outbound capture port", set: portOpt(func(c *Config) *uint16 { return &c.ProxyPort })},
	{long: "inbound-capture-port", short: "z", envs: []string{"INBOUND_CAPTURE_PORT"}, def: "15006", usage: "inbound capture port", set: portOpt(func(c *Config) *uint16 { return &c.InboundCapturePort })},
	{long: "inbound-tunnel-port", short: "e", envs: []string{"INBOUND_TUNNEL_PORT"}, def: "15008", usage: "tunnel port, never captured inbound", set: portOpt(func(c *Config) *uint16 { return &c.InboundTunnelPort })},
	{long: "proxy-uid", short: "u", envs: []string{"PROXY_UID"}, usage: "comma list of uids whose traffic is not captured (default: the uid of user ENVOY_USER, istio-proxy, else 1337)", set: func(c *Config, env Environment, v string) (err error) {
		if strings.TrimSpace(v) == "" {
			c.ProxyUIDs = []uint32{env.envoyUserUID()}
			return nil
		}
		c.ProxyUIDs, err = parseIDs(v)
		return err
	}},
	{long: "proxy-gid", short: "g", envs: []string{"PROXY_GID"}, def: "", usage: "comma list of gids whose traffic is not captured (default: the uids)", set: func(c *Config, _ Environment, v string) (err error) {
		if strings.TrimSpace(v) == "" {
			c.ProxyGIDs = append([]uint32(nil), c.ProxyUIDs...)
			return nil
		}
		c.ProxyGIDs, err = parseIDs(v)
		return err
	}},
	{long: "istio-inbound-interception-mode", short: "m", envs: []string{"ISTIO_INBOUND_INTERCEPTION_MODE"}, def: "REDIRECT", usage: "REDIRECT or TPROXY", set: func(c *Config, _ Environment, v string) (err error) {
		c.InboundMode, err = ParseMode(v)
		if SpelledAsRedirect(v) {
			c.Unapplied = append(c.Unapplied, fmt.Sprintf("-m %s: REDIRECT, as Istio programs for anything but TPROXY in capitals", v))
		}
		return err
	}},
	{long: "istio-inbound-ports", short: "b", envs: []string{"ISTIO_INBOUND_PORTS"}, usage: "inbound ports to capture: '*' for all, empty for none", set: func(c *Config, _ Environment, v string) (err error) {
		c.InboundPorts, err = ParsePorts(v)
		return err
	}},
	{long: "istio-local-exclude-ports", short: "d", envs: []string{"ISTIO_LOCAL_EXCLUDE_PORTS"}, usage: "inbound ports not captured (with -b '*')", set: rangesOpt(func(c *Config) *[]ipt.PortRange { return &c.InboundExcludePorts })},
	{long: "istio-exclude-interfaces", short: "c", envs: []string{"ISTIO_EXCLUDE_INTERFACES"}, usage: "interfaces with no capture at all", set: ifacesOpt(func(c *Config) *[]string { return &c.ExcludeInterfaces })},
	{long: "istio-service-cidr", short: "i", envs: []string{"ISTIO_SERVICE_CIDR"}, usage: "outbound CIDRs to capture: '*' for all, empty for none", set: func(c *Config, _ Environment, v string) (err error) {
		c.OutboundCIDRs, err = ParseCIDRs(v)
		return err
	}},
	{long: "istio-service-exclude-cidr", short: "x", envs: []string{"ISTIO_SERVICE_EXCLUDE_CIDR"}, usage: "outbound CIDRs not captured", set: func(c *Config, _ Environment, v string) (err error) {
		c.OutboundExcludeCIDR, err = ParseCIDRList(v)
		return err
	}},
	{long: "istio-outbound-ports", short: "q", envs: []string{"ISTIO_OUTBOUND_PORTS"}, usage: "outbound ports always captured", set: rangesOpt(func(c *Config) *[]ipt.PortRange { return &c.OutboundPorts })},
	{long: "istio-local-outbound-ports-exclude", short: "o", envs: []string{"ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE"}, usage: "outbound ports never captured", set: rangesOpt(func(c *Config) *[]ipt.PortRange { return &c.OutboundExcludePorts })},
	{long: "kube-virt-interfaces", short: "k", envs: []string{"KUBE_VIRT_INTERFACES"}, usage: "interfaces whose inbound is treated as outbound", set: ifacesOpt(func(c *Config) *[]string { return &c.VirtualInterfaces })},
	{long: "istio-inbound-tproxy-mark", short: "t", envs: []string{"ISTIO_INBOUND_TPROXY_MARK"}, def: "1337", usage: "TPROXY fwmark", set: uint32Opt(func(c *Config) *uint32 { return &c.TProxyMark }, "mark")},
	{long: "istio-inbound-tproxy-route-table", short: "r", envs: []string{"ISTIO_INBOUND_TPROXY_ROUTE_TABLE"}, def: "133", usage: "TPROXY route table", set: func(c *Config, env Environment, v string) error {
		if err := uint32Opt(func(c *Config) *uint32 { return &c.TProxyRouteTable }, "route table")(c, env, v); err != nil {
			return err
		}
		if t := c.TProxyRouteTable; t == 0 || t >= 253 && t <= 255 {
			return fmt.Errorf("route table %d is reserved", t)
		}
		return nil
	}},
	{long: "dry-run", short: "n", envs: []string{"DRY_RUN"}, boolean: true, usage: "print what would be applied, change nothing", set: boolOpt(func(c *Config) *bool { return &c.DryRun })},
	{long: "redirect-dns", envs: []string{"REDIRECT_DNS", "ISTIO_META_DNS_CAPTURE"}, boolean: true, usage: "capture DNS to the agent on 15053", set: boolOpt(func(c *Config) *bool { return &c.RedirectDNS })},
	{long: "capture-all-dns", envs: []string{"CAPTURE_ALL_DNS"}, boolean: true, usage: "capture all port 53 traffic, not only to resolv.conf servers", set: boolOpt(func(c *Config) *bool { return &c.CaptureAllDNS })},
	{long: "drop-invalid", envs: []string{"DROP_INVALID", "INVALID_DROP"}, boolean: true, usage: "drop conntrack INVALID inbound packets", set: boolOpt(func(c *Config) *bool { return &c.DropInvalid })},
	{long: "dual-stack", envs: []string{"DUAL_STACK", "ISTIO_DUAL_STACK"}, boolean: true, usage: "program IPv4 and IPv6", set: boolOpt(func(c *Config) *bool { return &c.DualStack })},
	{long: "run-validation", envs: []string{"RUN_VALIDATION"}, boolean: true, usage: "probe that capture works after applying", set: boolOpt(func(c *Config) *bool { return &c.RunValidation })},
	{long: "skip-rule-apply", envs: []string{"SKIP_RULE_APPLY"}, boolean: true, usage: "don't touch rules (validation only)", set: boolOpt(func(c *Config) *bool { return &c.SkipRuleApply })},
	{long: "iptables-probe-port", envs: []string{"IPTABLES_PROBE_PORT"}, def: "15002", usage: "validation target port", set: portOpt(func(c *Config) *uint16 { return &c.ProbePort })},
	{long: "probe-timeout", envs: []string{"PROBE_TIMEOUT"}, def: "5s", usage: "validation timeout", set: func(c *Config, _ Environment, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration", v)
		}
		c.ProbeTimeout = d
		return nil
	}},
	{long: "reconcile", envs: []string{"RECONCILE"}, boolean: true, usage: "repair rules left by an earlier run (Skiff always converges atomically)", set: boolOpt(func(c *Config) *bool { return &c.Reconcile })},
	{long: "cni-mode", envs: []string{"CNI_MODE"}, boolean: true, usage: "Istio's: run as its CNI plugin does, with a pod-scoped xtables lock (no effect: the lock is the mount namespace's own)", set: func(c *Config, _ Environment, v string) error {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a boolean", v)
		}
		if on {
			c.Unapplied = append(c.Unapplied, "--cni-mode: the xtables lock is the running mount namespace's own")
		}
		return nil
	}},
	{long: "cleanup-only", envs: []string{"CLEANUP_ONLY"}, boolean: true, usage: "remove all our rules and chains, nothing else", set: boolOpt(func(c *Config) *bool { return &c.CleanupOnly })},
	{long: "force-apply", envs: []string{"FORCE_APPLY"}, boolean: true, usage: "rewrite the rules even if they look right", set: boolOpt(func(c *Config) *bool { return &c.ForceApply })},
	{long: "network-namespace", envs: []string{"NETWORK_NAMESPACE"}, usage: "run inside the network namespace at this path", set: func(c *Config, _ Environment, v string) error {
		c.NetworkNamespace = strings.TrimSpace(v)
		return nil
	}},
	{long: "native-nftables", envs: []string{"NATIVE_NFTABLES"}, boolean: true, usage: "program nftables directly instead of iptables", set: boolOpt(func(c *Config) *bool { return &c.NativeNFTables })},
	{long: "force-iptables-binary", envs: []string{"FORCE_IPTABLES_BINARY"}, usage: "'legacy' or 'nft' instead of detecting", set: func(c *Config, _ Environment, v string) (err error) {
		if strings.TrimSpace(v) == "" {
			c.Backend = ipt.Plain
			return nil
		}
		c.Backend, err = ipt.ParseMode(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q: %w", v, err)
		}
		return nil
	}},
	// Env only.
	{envs: []string{"ISTIO_OUTBOUND_OWNER_GROUPS"}, def: "*", set: groupsOpt(func(c *Config) *[]uint32 { return &c.OwnerGroupsInclude })},
	{envs: []string{"ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE"}, set: groupsOpt(func(c *Config) *[]uint32 { return &c.OwnerGroupsExclude })},
	{envs: []string{"ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR"}, def: "127.0.0.1/32", set: func(c *Config, _ Environment, v string) (err error) {
		c.IPv4LoopbackCIDR, err = parseLoopback(v)
		return err
	}},
}

// Parse binds istio-iptables arguments and environment to a validated Config.
// A flag on the command line wins over its env vars, which win over the
// default. Errors are *UsageError and name the flag or env var and the value.
func Parse(args []string, env Environment, usage io.Writer) (*Config, error) {
	fs := pflag.NewFlagSet("istio-iptables", pflag.ContinueOnError)
	fs.SetOutput(usage)
	fs.SortFlags = false
	vals := make([]*string, len(options))
	for i, o := range options {
		if o.long == "" {
			continue
		}
		vals[i] = fs.StringP(o.long, o.short, o.def, o.usage+envHelp(o))
		if o.boolean {
			fs.Lookup(o.long).NoOptDefVal = "true"
		}
	}
	logs := logflags.Register(fs, "default:info")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, &UsageError{err}
	}
	if fs.NArg() > 0 {
		return nil, &UsageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	c := Default()
	for i, o := range options {
		v, source := o.def, ""
		if o.long != "" && fs.Changed(o.long) {
			v, source = *vals[i], "flag --"+o.long
		} else {
			for _, e := range o.envs {
				if ev, ok := env.lookup(e); ok && (ev != "" || !o.boolean) {
					v, source = ev, "env "+e
					break
				}
			}
		}
		if o.boolean && v == "" {
			v = "false"
		}
		if err := o.set(&c, env, v); err != nil {
			if source == "" {
				source = "default of --" + o.long
			}
			return nil, &UsageError{fmt.Errorf("invalid %s: %w", source, err)}
		}
	}
	if err := c.Validate(); err != nil {
		return nil, &UsageError{err}
	}
	lvl, err := logs.Level()
	if err != nil {
		return nil, &UsageError{err}
	}
	c.LogLevel = lvl
	c.LogJSON, c.Unapplied = logs.JSON(), append(logs.Unapplied(), c.Unapplied...)
	return &c, nil
}

func (e Environment) lookup(name string) (string, bool) {
	if e.Getenv == nil {
		return "", false
	}
	return e.Getenv(name)
}

func envHelp(o option) string {
	if len(o.envs) == 0 {
		return ""
	}
	return " (env " + strings.Join(o.envs, ", ") + ")"
}

// Validate checks what no single setting can: combinations.
func (c *Policy) Validate() error {
	if len(c.OwnerGroupsInclude) > 0 && len(c.OwnerGroupsExclude) > 0 {
		return errors.New("only one of env ISTIO_OUTBOUND_OWNER_GROUPS and ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE may be set")
	}
	if len(c.ProxyUIDs) == 0 && len(c.ProxyGIDs) == 0 {
		return errors.New("invalid flag --proxy-uid: at least one uid or gid must be exempt from capture")
	}
	if c.InboundMode != Redirect && c.InboundMode != TProxy {
		return fmt.Errorf("invalid interception mode %q", c.InboundMode)
	}
	return nil
}
