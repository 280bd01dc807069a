package capture

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/skiff-mesh/skiff/pkg/iptables"
)

// InterceptionMode is how inbound traffic reaches the proxy.
type InterceptionMode string

// The inbound interception modes.
const (
	Redirect InterceptionMode = "REDIRECT"
	TProxy   InterceptionMode = "TPROXY"
)

// Ports is a set of ports to capture: all of them, or a list of ranges.
// The zero value captures nothing.
type Ports struct {
	All    bool
	Ranges []iptables.PortRange
}

// CIDRs is a set of destinations to capture: all of them, or a list of prefixes.
// The zero value captures nothing.
type CIDRs struct {
	All      bool
	Prefixes []netip.Prefix
}

// Policy is the interception policy of one pod, typed and validated: what
// Build turns into rules. It says nothing about how or where it is applied.
type Policy struct {
	ProxyPort          uint16 // outbound capture port (15001)
	InboundCapturePort uint16 // inbound capture port (15006)
	InboundTunnelPort  uint16 // HBONE tunnel port, never captured inbound (15008)
	ProxyUIDs          []uint32
	ProxyGIDs          []uint32
	InboundMode        InterceptionMode

	InboundPorts         Ports
	InboundExcludePorts  []iptables.PortRange
	OutboundCIDRs        CIDRs
	OutboundExcludeCIDR  []netip.Prefix
	OutboundPorts        []iptables.PortRange // always captured
	OutboundExcludePorts []iptables.PortRange
	ExcludeInterfaces    []string
	VirtualInterfaces    []string

	TProxyMark       uint32
	TProxyRouteTable uint32

	RedirectDNS   bool
	CaptureAllDNS bool
	// DNSServersV4 and DNSServersV6 are the resolv.conf nameservers whose DNS
	// is captured when CaptureAllDNS is off (Resolve fills them in).
	DNSServersV4 []netip.Addr
	DNSServersV6 []netip.Addr
	DropInvalid  bool

	// OwnerGroupsInclude, when set, limits capture to sockets of these gids;
	// OwnerGroupsExclude exempts sockets of these gids. At most one is set.
	OwnerGroupsInclude []uint32
	OwnerGroupsExclude []uint32
	IPv4LoopbackCIDR   netip.Prefix

	// EnableIPv6 programs ip6tables too (the pod has a global IPv6 address or
	// DualStack is set; Resolve decides). IPv4 is always programmed.
	EnableIPv6 bool
	DualStack  bool
}

// Options says how and where Run applies a Policy; none of it changes the rules.
type Options struct {
	// DryRun prints the transactions and changes nothing.
	DryRun bool
	// CleanupOnly removes everything istio-iptables owns instead of applying.
	CleanupOnly bool
	// SkipRuleApply touches no rules (validation only).
	SkipRuleApply bool
	// ForceApply rewrites the rules even when they are in place.
	ForceApply bool
	// Reconcile is accepted for Istio's flag; Skiff always converges.
	Reconcile bool
	// NetworkNamespace is the path of the namespace to program; "" is the caller's.
	NetworkNamespace string
	// NativeNFTables programs nftables over netlink instead of iptables.
	NativeNFTables bool
	// Backend forces the iptables flavour; Plain means detect.
	Backend iptables.Mode
	// RunValidation probes that capture works after applying.
	RunValidation bool
	// ProbePort is the port the probe dials; ProbeTimeout bounds it.
	ProbePort    uint16
	ProbeTimeout time.Duration
	// LogLevel and LogJSON are Istio's --log_output_level and --log_as_json.
	LogLevel slog.Level
	LogJSON  bool
	// Unapplied lists the Istio logging flags given that change nothing.
	Unapplied []string
}

// Config is one istio-iptables invocation: the Policy to apply and the
// Options to apply it with, two values that travel together only this far.
// Parse (istio-iptables flags and env) and the CNI plugin build it; Run and
// Check take it apart.
type Config struct {
	Policy
	Options
}

// Default returns the configuration of istio-iptables with no flags or env set.
func Default() Config {
	return Config{
		Policy: Policy{
			ProxyPort:          15001,
			InboundCapturePort: 15006,
			InboundTunnelPort:  15008,
			ProxyUIDs:          []uint32{1337},
			ProxyGIDs:          []uint32{1337},
			InboundMode:        Redirect,
			TProxyMark:         1337,
			TProxyRouteTable:   133,
			IPv4LoopbackCIDR:   netip.MustParsePrefix("127.0.0.1/32"),
		},
		Options: Options{
			ProbePort:    15002,
			ProbeTimeout: 5 * time.Second,
		},
	}
}

// Injector returns the configuration the sidecar injector passes to istio-iptables:
// -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020.
func Injector() Config {
	c := Default()
	c.OutboundCIDRs = CIDRs{All: true}
	c.InboundPorts = Ports{All: true}
	c.InboundExcludePorts = []iptables.PortRange{iptables.Port(15090), iptables.Port(15021), iptables.Port(15020)}
	return c
}
