package capture

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// passthroughV6 is Envoy's IPv6 inbound passthrough source, added to lo.
var passthroughV6 = netip.MustParsePrefix("::6/128")

// netlinkRouting is the Routing of the calling thread's namespace. Each
// call works on one rtnetlink socket of that namespace.
type netlinkRouting struct{}

var _ Routing = netlinkRouting{}

// Setup adds ::6 to lo for IPv6, and sets up TPROXY policy routing (or
// removes it in REDIRECT mode).
func (netlinkRouting) Setup(p *Policy) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("open rtnetlink: %w", err)
	}
	defer h.Close()
	if p.EnableIPv6 {
		if err := addPassthroughV6(h); err != nil {
			return err
		}
	}
	if p.InboundMode == TProxy {
		families := []bool{false}
		if p.EnableIPv6 {
			families = append(families, true)
		}
		return setupRouting(h, p, families)
	}
	return cleanupRouting(h, p)
}

// Remove deletes the TPROXY routing of both families and ::6.
func (netlinkRouting) Remove(p *Policy) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("open rtnetlink: %w", err)
	}
	defer h.Close()
	return errors.Join(cleanupRouting(h, p), removePassthroughV6(h))
}

func nlFamily(v6 bool) int {
	if v6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// tproxyRoute is the route that delivers every fwmarked packet locally.
func tproxyRoute(cfg *Policy, lo netlink.Link, v6 bool) *netlink.Route {
	dst := &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	if v6 {
		dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return &netlink.Route{
		LinkIndex: lo.Attrs().Index, Dst: dst, Table: int(cfg.TProxyRouteTable),
		Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST, Family: nlFamily(v6),
	}
}

// tproxyRule is "fwmark MARK lookup TABLE"; family FAMILY_ALL matches
// both families in a dump.
func tproxyRule(cfg *Policy, family int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = family
	r.Mark = cfg.TProxyMark
	r.Table = int(cfg.TProxyRouteTable)
	return r
}

// tproxyRules lists the TPROXY rules of family (FAMILY_ALL: both).
func tproxyRules(h *netlink.Handle, cfg *Policy, family int) ([]netlink.Rule, error) {
	rules, err := h.RuleListFiltered(family, tproxyRule(cfg, family), netlink.RT_FILTER_MARK|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list ip rules: %w", err)
	}
	return rules, nil
}

// setupRouting installs what TPROXY needs, through netlink and idempotently:
// "ip rule add fwmark MARK lookup TABLE" and "ip route add local default dev
// lo table TABLE" per family.
func setupRouting(h *netlink.Handle, cfg *Policy, families []bool) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	for _, v6 := range families {
		rules, err := tproxyRules(h, cfg, nlFamily(v6))
		if err != nil {
			return err
		}
		if len(rules) == 0 {
			if err := h.RuleAdd(tproxyRule(cfg, nlFamily(v6))); err != nil {
				return fmt.Errorf("add ip rule fwmark %d lookup %d: %w", cfg.TProxyMark, cfg.TProxyRouteTable, err)
			}
		}
		if err := h.RouteReplace(tproxyRoute(cfg, lo, v6)); err != nil {
			return fmt.Errorf("add local default route to table %d: %w", cfg.TProxyRouteTable, err)
		}
	}
	return nil
}

// cleanupRouting removes the TPROXY rules and routes of both families, if
// present: one dump of the rules and one of the table's routes, then a
// delete for each found (a fresh pod's namespace has none).
func cleanupRouting(h *netlink.Handle, cfg *Policy) error {
	rules, err := tproxyRules(h, cfg, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rules {
		if err := h.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete ip rule: %w", err))
		}
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: int(cfg.TProxyRouteTable), Type: unix.RTN_LOCAL},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_TYPE)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list routes of table %d: %w", cfg.TProxyRouteTable, err))...)
	}
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue // not the local default route
			}
		}
		if err := h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete local default route from table %d: %w", cfg.TProxyRouteTable, err))
		}
	}
	return errors.Join(errs...)
}

// passthroughAddr is ::6/128 as a netlink address.
func passthroughAddr() *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: passthroughV6.Addr().AsSlice(), Mask: net.CIDRMask(128, 128)}}
}

// addPassthroughV6 puts ::6/128 on lo so the proxy can use it as a source.
func addPassthroughV6(h *netlink.Handle) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := h.AddrReplace(lo, passthroughAddr()); err != nil {
		return fmt.Errorf("add %s to lo: %w", passthroughV6, err)
	}
	return nil
}

func removePassthroughV6(h *netlink.Handle) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := h.AddrDel(lo, passthroughAddr()); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s from lo: %w", passthroughV6, err)
	}
	return nil
}
