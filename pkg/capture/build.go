package capture

import (
	"net/netip"
	"slices"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// The chains Skiff owns, named as Istio names them.
const (
	ChainInbound    = "ISTIO_INBOUND"
	ChainRedirect   = "ISTIO_REDIRECT"
	ChainInRedirect = "ISTIO_IN_REDIRECT"
	ChainOutput     = "ISTIO_OUTPUT"
	ChainOutputDNS  = "ISTIO_OUTPUT_DNS"
	ChainDivert     = "ISTIO_DIVERT"
	ChainTProxy     = "ISTIO_TPROXY"
	ChainDrop       = "ISTIO_DROP"
)

// DNSProxyPort is where the agent's DNS proxy listens.
const DNSProxyPort = 15053

// proxyLoopbackMark marks the proxy's own calls to its pod IP in TPROXY mode.
const proxyLoopbackMark = 1338

// Build returns the rules for each family the policy programs: IPv4 always,
// IPv6 when EnableIPv6 is set. For the same policy the rules, chains and
// order are those Istio's istio-iptables installs. Build does no I/O.
func Build(cfg *Policy) []*ipt.Ruleset {
	out := []*ipt.Ruleset{build(cfg, ipt.IPv4)}
	if cfg.EnableIPv6 {
		out = append(out, build(cfg, ipt.IPv6))
	}
	return out
}

// family holds the per-family addresses the rules use.
type family struct {
	f           ipt.Family
	loopback    netip.Prefix // the proxy's loopback destination
	passthrough netip.Prefix // Envoy's inbound passthrough source
	unspecified netip.Addr
	dnsServers  []netip.Addr
}

func familyOf(cfg *Policy, f ipt.Family) family {
	if f == ipt.IPv6 {
		return family{f, netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("::6/128"), netip.IPv6Unspecified(), cfg.DNSServersV6}
	}
	lo := cfg.IPv4LoopbackCIDR
	if !lo.IsValid() {
		lo = netip.MustParsePrefix("127.0.0.1/32")
	}
	return family{f, lo, netip.MustParsePrefix("127.0.0.6/32"), netip.IPv4Unspecified(), cfg.DNSServersV4}
}

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

func build(cfg *Policy, f ipt.Family) *ipt.Ruleset {
	fam := familyOf(cfg, f)
	b := newBuilder(f)
	tproxy := cfg.InboundMode == TProxy
	ret := ipt.Target{Kind: ipt.Return}
	lo := func(not bool) ipt.Addr { return ipt.Addr{Prefix: fam.loopback, Not: not} }

	dns := capturesDNS(cfg)

	b.chain(ipt.NAT, ChainInbound, ChainRedirect, ChainInRedirect, ChainOutput)
	if tproxy {
		b.chain(ipt.Mangle, ChainDivert, ChainTProxy, ChainInbound)
	}
	if dns && (cfg.CaptureAllDNS || len(fam.dnsServers) > 0) {
		b.chain(ipt.NAT, ChainOutputDNS)
	}

	// 1. Interfaces with no capture at all.
	for _, ifc := range cfg.ExcludeInterfaces {
		if tproxy {
			b.add(ipt.Mangle, "PREROUTING", ipt.Match{In: ifc}, ret, "exclude interface "+ifc+" from inbound capture")
			b.add(ipt.Mangle, "OUTPUT", ipt.Match{Out: ifc}, ret, "exclude interface "+ifc+" from capture")
		}
		b.add(ipt.NAT, "PREROUTING", ipt.Match{In: ifc}, ret, "exclude interface "+ifc+" from inbound capture")
		b.add(ipt.NAT, "OUTPUT", ipt.Match{Out: ifc}, ret, "exclude interface "+ifc+" from outbound capture")
	}
	// 2. Virtual interfaces: their inbound is not treated as inbound.
	for _, ifc := range cfg.VirtualInterfaces {
		b.insert(ipt.NAT, "PREROUTING", 1, ipt.Match{In: ifc}, ret, "virtual interface "+ifc+": skip inbound capture")
	}
	// 3. Drop packets conntrack considers invalid.
	if cfg.DropInvalid {
		b.chain(ipt.Mangle, ChainDrop)
		b.add(ipt.Mangle, "PREROUTING", ipt.Match{CTState: "INVALID"}, ipt.JumpTo(ChainDrop), "drop conntrack INVALID packets")
		b.add(ipt.Mangle, ChainDrop, ipt.Match{}, ipt.Target{Kind: ipt.Drop}, "drop")
	}
	// 4-5. The tunnel port is never captured; the two redirect chains.
	b.add(ipt.NAT, ChainInbound, ipt.Match{Proto: "tcp", DPort: ipt.Ports(ipt.Port(cfg.InboundTunnelPort))}, ret, "never capture the inbound tunnel port")
	b.add(ipt.NAT, ChainRedirect, ipt.Match{Proto: "tcp"}, ipt.Target{Kind: ipt.Redirect, Port: cfg.ProxyPort}, "send outbound TCP to the proxy")
	b.add(ipt.NAT, ChainInRedirect, ipt.Match{Proto: "tcp"}, ipt.Target{Kind: ipt.Redirect, Port: cfg.InboundCapturePort}, "send inbound TCP to the proxy")

	// 6. Inbound capture.
	if cfg.InboundPorts.All || len(cfg.InboundPorts.Ranges) > 0 {
		if tproxy {
			buildInboundTProxy(b, cfg, fam)
		} else {
			b.add(ipt.NAT, "PREROUTING", ipt.Match{Proto: "tcp"}, ipt.JumpTo(ChainInbound), "inbound TCP")
			if cfg.InboundPorts.All {
				for _, p := range cfg.InboundExcludePorts {
					b.add(ipt.NAT, ChainInbound, ipt.Match{Proto: "tcp", DPort: ipt.Ports(p)}, ret, "inbound port "+p.String()+" excluded")
				}
				b.add(ipt.NAT, ChainInbound, ipt.Match{Proto: "tcp"}, ipt.JumpTo(ChainInRedirect), "capture all other inbound TCP")
			} else {
				for _, p := range cfg.InboundPorts.Ranges {
					b.add(ipt.NAT, ChainInbound, ipt.Match{Proto: "tcp", DPort: ipt.Ports(p)}, ipt.JumpTo(ChainInRedirect), "capture inbound port "+p.String())
				}
			}
		}
	}

	// 7-8. Outbound.
	b.add(ipt.NAT, "OUTPUT", ipt.Match{}, ipt.JumpTo(ChainOutput), "all outbound")
	for _, p := range cfg.OutboundExcludePorts {
		b.add(ipt.NAT, ChainOutput, ipt.Match{Proto: "tcp", DPort: ipt.Ports(p)}, ret, "outbound TCP port "+p.String()+" excluded")
		b.add(ipt.NAT, ChainOutput, ipt.Match{Proto: "udp", DPort: ipt.Ports(p)}, ret, "outbound UDP port "+p.String()+" excluded")
	}
	// 9. Envoy's inbound passthrough connections to the app.
	b.add(ipt.NAT, ChainOutput, ipt.Match{Out: "lo", Src: ipt.Addr{Prefix: fam.passthrough}}, ret, "proxy's inbound passthrough to the app")
	// 10-11. The proxy's own traffic, per uid then per gid.
	owners := proxyOwners(cfg)
	loopbackCaptured := includesLoopback(cfg.OutboundCIDRs)
	for _, o := range owners {
		toSelf := ipt.Match{Out: "lo", Dst: lo(true), Proto: "tcp", Owners: []ipt.Owner{o}}
		if dns && !o.GID {
			toSelf.MultiDPorts, toSelf.NotMultiDPorts = []ipt.PortRange{ipt.Port(53), ipt.Port(cfg.InboundTunnelPort)}, true
		} else {
			toSelf.DPort = ipt.NotPorts(ipt.Port(cfg.InboundTunnelPort))
		}
		b.add(ipt.NAT, ChainOutput, toSelf, ipt.JumpTo(ChainInRedirect), "proxy calling its own pod IP goes through inbound")
		// Istio leaves app-to-app loopback to the rules below when a
		// captured destination is a loopback address, so that it is captured.
		if !loopbackCaptured {
			appLo := ipt.Match{Out: "lo", Owners: []ipt.Owner{{GID: o.GID, ID: o.ID, Not: true}}}
			if dns {
				appLo.Proto, appLo.DPort = "tcp", ipt.NotPorts(ipt.Port(53))
			}
			b.add(ipt.NAT, ChainOutput, appLo, ret, "app to app over loopback")
		}
		b.add(ipt.NAT, ChainOutput, ipt.Match{Owners: []ipt.Owner{o}}, ret, "the proxy's own traffic")
	}
	// 12. Owner groups.
	if len(cfg.OwnerGroupsInclude) > 0 {
		m := ipt.Match{}
		for _, g := range cfg.OwnerGroupsInclude {
			m.Owners = append(m.Owners, ipt.Owner{GID: true, ID: g, Not: true})
		}
		b.add(ipt.NAT, ChainOutput, m, ret, "capture only the listed owner groups")
	}
	for _, g := range cfg.OwnerGroupsExclude {
		b.add(ipt.NAT, ChainOutput, ipt.Match{Owners: []ipt.Owner{{GID: true, ID: g}}}, ret, "owner group excluded")
	}
	// 13. DNS to the agent.
	if dns {
		buildDNS(b, cfg, fam, owners)
	}
	// 14-15. Loopback and excluded destinations go straight out.
	b.add(ipt.NAT, ChainOutput, ipt.Match{Dst: lo(false)}, ret, "loopback")
	for _, p := range cfg.OutboundExcludeCIDR {
		if is6(p) == (f == ipt.IPv6) {
			b.add(ipt.NAT, ChainOutput, ipt.Match{Dst: ipt.Addr{Prefix: p}}, ret, "destination "+p.String()+" excluded")
		}
	}
	// 16. Ports always captured.
	for _, p := range cfg.OutboundPorts {
		b.add(ipt.NAT, ChainOutput, ipt.Match{Proto: "tcp", DPort: ipt.Ports(p)}, ipt.JumpTo(ChainRedirect), "capture outbound port "+p.String())
	}
	// 17. Destinations captured.
	if cfg.OutboundCIDRs.All {
		b.add(ipt.NAT, ChainOutput, ipt.Match{}, ipt.JumpTo(ChainRedirect), "capture all other outbound")
		for _, ifc := range cfg.VirtualInterfaces {
			b.insert(ipt.NAT, "PREROUTING", 1, ipt.Match{In: ifc}, ipt.JumpTo(ChainRedirect), "virtual interface "+ifc+": capture as outbound")
		}
	} else {
		for _, p := range cfg.OutboundCIDRs.Prefixes {
			if is6(p) != (f == ipt.IPv6) {
				continue
			}
			for _, ifc := range cfg.VirtualInterfaces {
				b.insert(ipt.NAT, "PREROUTING", 1, ipt.Match{In: ifc, Dst: ipt.Addr{Prefix: p}}, ipt.JumpTo(ChainRedirect), "virtual interface "+ifc+": capture "+p.String()+" as outbound")
			}
			b.add(ipt.NAT, ChainOutput, ipt.Match{Dst: ipt.Addr{Prefix: p}}, ipt.JumpTo(ChainRedirect), "capture outbound to "+p.String())
		}
	}
	return b.ruleset()
}

// capturesDNS reports whether DNS is captured at all: Istio turns
// --redirect-dns off when it captures only the resolv.conf nameservers and
// there are none, in either family.
func capturesDNS(cfg *Policy) bool {
	return cfg.RedirectDNS && (cfg.CaptureAllDNS || len(cfg.DNSServersV4)+len(cfg.DNSServersV6) > 0)
}

// includesLoopback reports whether a captured destination prefix, of either
// family, is written with a loopback address (Istio's HasLoopBackIP).
func includesLoopback(c CIDRs) bool {
	return slices.ContainsFunc(c.Prefixes, func(p netip.Prefix) bool { return p.Addr().IsLoopback() })
}

func is6(p netip.Prefix) bool { return p.Addr().Is6() && !p.Addr().Is4In6() }

func proxyOwners(cfg *Policy) []ipt.Owner {
	var out []ipt.Owner
	for _, u := range cfg.ProxyUIDs {
		out = append(out, ipt.Owner{ID: u})
	}
	for _, g := range cfg.ProxyGIDs {
		out = append(out, ipt.Owner{GID: true, ID: g})
	}
	return out
}

func buildInboundTProxy(b *builder, cfg *Policy, fam family) {
	ret := ipt.Target{Kind: ipt.Return}
	mark := cfg.TProxyMark
	b.add(ipt.Mangle, ChainDivert, ipt.Match{}, ipt.Target{Kind: ipt.SetMark, Mark: mark}, "mark established inbound for local delivery")
	b.add(ipt.Mangle, ChainDivert, ipt.Match{}, ipt.Target{Kind: ipt.Accept}, "accept established inbound")
	b.add(ipt.Mangle, ChainTProxy, ipt.Match{Dst: ipt.Addr{Prefix: fam.loopback, Not: true}, Proto: "tcp"},
		ipt.Target{Kind: ipt.TProxy, Port: cfg.InboundCapturePort, Mark: mark, OnIP: fam.unspecified}, "deliver new inbound to the proxy")
	b.add(ipt.Mangle, "PREROUTING", ipt.Match{Proto: "tcp"}, ipt.JumpTo(ChainInbound), "inbound TCP")
	established := "RELATED,ESTABLISHED"
	if cfg.InboundPorts.All {
		for _, p := range cfg.InboundExcludePorts {
			b.add(ipt.Mangle, ChainInbound, ipt.Match{Proto: "tcp", DPort: ipt.Ports(p)}, ret, "inbound port "+p.String()+" excluded")
		}
		b.add(ipt.Mangle, ChainInbound, ipt.Match{Proto: "tcp", CTState: established}, ipt.JumpTo(ChainDivert), "established inbound")
		b.add(ipt.Mangle, ChainInbound, ipt.Match{Proto: "tcp"}, ipt.JumpTo(ChainTProxy), "new inbound")
	} else {
		for _, p := range cfg.InboundPorts.Ranges {
			b.add(ipt.Mangle, ChainInbound, ipt.Match{Proto: "tcp", DPort: ipt.Ports(p), CTState: established}, ipt.JumpTo(ChainDivert), "established inbound to port "+p.String())
			b.add(ipt.Mangle, ChainInbound, ipt.Match{Proto: "tcp", DPort: ipt.Ports(p)}, ipt.JumpTo(ChainTProxy), "new inbound to port "+p.String())
		}
	}
	b.add(ipt.Mangle, "PREROUTING", ipt.Match{Proto: "tcp", Mark: &ipt.MarkMatch{Value: mark}}, ipt.Target{Kind: ipt.SaveConnMark}, "remember the mark on the connection")
	b.add(ipt.Mangle, "OUTPUT", ipt.Match{Out: "lo", Proto: "tcp", Mark: &ipt.MarkMatch{Value: mark}}, ret, "marked loopback traffic")
	for _, o := range proxyOwners(cfg) {
		b.add(ipt.Mangle, "OUTPUT", ipt.Match{Dst: ipt.Addr{Prefix: fam.loopback, Not: true}, Out: "lo", Proto: "tcp", Owners: []ipt.Owner{o}},
			ipt.Target{Kind: ipt.SetMark, Mark: proxyLoopbackMark}, "mark the proxy's calls to its own pod IP")
	}
	b.add(ipt.Mangle, "OUTPUT", ipt.Match{Proto: "tcp", ConnMark: &ipt.MarkMatch{Value: mark}}, ipt.Target{Kind: ipt.RestoreConnMark}, "replies of diverted connections")
	b.insert(ipt.Mangle, ChainInbound, 1, ipt.Match{Proto: "tcp", Mark: &ipt.MarkMatch{Value: mark}}, ret, "already diverted")
	b.insert(ipt.Mangle, ChainInbound, 2, ipt.Match{Proto: "tcp", Src: ipt.Addr{Prefix: fam.passthrough}, In: "lo"}, ret, "proxy's inbound passthrough")
	b.insert(ipt.Mangle, ChainInbound, 3, ipt.Match{Proto: "tcp", In: "lo", Mark: &ipt.MarkMatch{Value: proxyLoopbackMark, Not: true}}, ret, "loopback not from the proxy")
}

func buildDNS(b *builder, cfg *Policy, fam family, owners []ipt.Owner) {
	toAgent := ipt.Target{Kind: ipt.Redirect, Port: DNSProxyPort}
	dns := ipt.Ports(ipt.Port(53))
	// The jump exists in a family only when it captures DNS there; the
	// proxy's own DNS has already returned in ISTIO_OUTPUT.
	if cfg.CaptureAllDNS || len(fam.dnsServers) > 0 {
		b.add(ipt.NAT, ChainOutput, ipt.Match{}, ipt.JumpTo(ChainOutputDNS), "DNS")
	}
	if cfg.CaptureAllDNS {
		b.add(ipt.NAT, ChainOutputDNS, ipt.Match{Proto: "tcp", DPort: dns}, toAgent, "DNS over TCP to the agent")
	} else {
		for _, s := range fam.dnsServers {
			b.add(ipt.NAT, ChainOutputDNS, ipt.Match{Proto: "tcp", DPort: dns, Dst: ipt.Addr{Prefix: host(s)}}, toAgent, "DNS over TCP to "+s.String()+" goes to the agent")
		}
	}
	if cfg.CaptureAllDNS {
		b.add(ipt.NAT, ChainOutputDNS, ipt.Match{Proto: "udp", DPort: dns}, toAgent, "DNS over UDP to the agent")
	} else {
		for _, s := range fam.dnsServers {
			b.add(ipt.NAT, ChainOutputDNS, ipt.Match{Proto: "udp", DPort: dns, Dst: ipt.Addr{Prefix: host(s)}}, toAgent, "DNS over UDP to "+s.String()+" goes to the agent")
		}
	}

	// Conntrack zones keep the app's and the proxy's UDP DNS flows apart.
	b.chain(ipt.Raw, ChainOutputDNS)
	b.add(ipt.Raw, "OUTPUT", ipt.Match{}, ipt.JumpTo(ChainOutputDNS), "DNS conntrack zones")
	for _, o := range owners {
		b.add(ipt.Raw, ChainOutputDNS, ipt.Match{Proto: "udp", DPort: dns, Owners: []ipt.Owner{o}}, ipt.Target{Kind: ipt.CTZone, Zone: 1}, "proxy's upstream queries in zone 1")
		b.add(ipt.Raw, ChainOutputDNS, ipt.Match{Proto: "udp", SPort: ipt.Ports(ipt.Port(DNSProxyPort)), Owners: []ipt.Owner{o}}, ipt.Target{Kind: ipt.CTZone, Zone: 2}, "proxy's answers to apps in zone 2")
	}
	if cfg.CaptureAllDNS {
		b.chain(ipt.Raw, ChainInbound)
		b.add(ipt.Raw, ChainOutputDNS, ipt.Match{Proto: "udp", DPort: dns}, ipt.Target{Kind: ipt.CTZone, Zone: 2}, "apps' queries in zone 2")
		b.add(ipt.Raw, "PREROUTING", ipt.Match{}, ipt.JumpTo(ChainInbound), "DNS answers")
		b.add(ipt.Raw, ChainInbound, ipt.Match{Proto: "udp", SPort: dns}, ipt.Target{Kind: ipt.CTZone, Zone: 1}, "upstream answers in zone 1")
		return
	}
	if len(fam.dnsServers) == 0 {
		return
	}
	b.chain(ipt.Raw, ChainInbound)
	b.add(ipt.Raw, "PREROUTING", ipt.Match{}, ipt.JumpTo(ChainInbound), "DNS answers")
	for _, s := range fam.dnsServers {
		b.add(ipt.Raw, ChainOutputDNS, ipt.Match{Proto: "udp", DPort: dns, Dst: ipt.Addr{Prefix: host(s)}}, ipt.Target{Kind: ipt.CTZone, Zone: 2}, "apps' queries to "+s.String()+" in zone 2")
		b.add(ipt.Raw, ChainInbound, ipt.Match{Proto: "udp", SPort: dns, Src: ipt.Addr{Prefix: host(s)}}, ipt.Target{Kind: ipt.CTZone, Zone: 1}, "answers from "+s.String()+" in zone 1")
	}
}

// builder records rules the way Istio issues them (append, or insert at a
// position) and yields each chain's final order.
type builder struct {
	rs     *ipt.Ruleset
	chains map[ipt.ChainRef][]ipt.Rule
	order  []ipt.ChainRef
}

func newBuilder(f ipt.Family) *builder {
	return &builder{rs: &ipt.Ruleset{Family: f}, chains: map[ipt.ChainRef][]ipt.Rule{}}
}

func (b *builder) chain(table string, names ...string) {
	for _, n := range names {
		ref := ipt.ChainRef{Table: table, Chain: n}
		if !slices.Contains(b.rs.Chains, ref) {
			b.rs.Chains = append(b.rs.Chains, ref)
		}
	}
}

func (b *builder) add(table, chain string, m ipt.Match, t ipt.Target, purpose string) {
	b.insert(table, chain, 0, m, t, purpose)
}

// insert puts the rule at 1-based position pos of the chain, or appends it when pos is 0.
func (b *builder) insert(table, chain string, pos int, m ipt.Match, t ipt.Target, purpose string) {
	ref := ipt.ChainRef{Table: table, Chain: chain}
	if _, ok := b.chains[ref]; !ok {
		b.order = append(b.order, ref)
	}
	r := ipt.Rule{Table: table, Chain: chain, Match: m, Target: t, Purpose: purpose, Head: pos > 0}
	rules := b.chains[ref]
	if pos == 0 || pos > len(rules) {
		b.chains[ref] = append(rules, r)
		return
	}
	b.chains[ref] = slices.Insert(rules, pos-1, r)
}

// ruleset flattens the chains: per table, built-in chains first, then ours in declaration order.
func (b *builder) ruleset() *ipt.Ruleset {
	for _, table := range ipt.Tables() {
		var refs []ipt.ChainRef
		for _, ref := range b.order {
			if ref.Table == table && ipt.IsBuiltin(table, ref.Chain) {
				refs = append(refs, ref)
			}
		}
		for _, ref := range b.rs.Chains {
			if ref.Table == table {
				refs = append(refs, ref)
			}
		}
		for _, ref := range refs {
			b.rs.Rules = append(b.rs.Rules, b.chains[ref]...)
		}
	}
	return b.rs
}
