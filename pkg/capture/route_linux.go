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

// netlinkRouting is the Routing of the calling thread's namespace.
type netlinkRouting struct{}

var _ Routing = netlinkRouting{}

// Setup adds ::6 to lo for IPv6, and sets up TPROXY policy routing (or
// removes it in REDIRECT mode).
func (netlinkRouting) Setup(p *Policy) error {
	if p.EnableIPv6 {
		if err := addPassthroughV6(); err != nil {
			return err
		}
	}
	if p.InboundMode == TProxy {
		families := []bool{false}
		if p.EnableIPv6 {
			families = append(families, true)
		}
		return setupRouting(p, families)
	}
	return cleanupRouting(p)
}

// Remove deletes the TPROXY routing of both families and ::6.
func (netlinkRouting) Remove(p *Policy) error {
	return errors.Join(cleanupRouting(p), removePassthroughV6())
}

func nlFamily(v6 bool) int {
	if v6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// tproxyRoute is the route that delivers every fwmarked packet locally.
func tproxyRoute(cfg *Policy, v6 bool) (*netlink.Route, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("find lo: %w", err)
	}
	dst := &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	if v6 {
		dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return &netlink.Route{
		LinkIndex: lo.Attrs().Index, Dst: dst, Table: int(cfg.TProxyRouteTable),
		Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST, Family: nlFamily(v6),
	}, nil
}

func tproxyRule(cfg *Policy, v6 bool) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = nlFamily(v6)
	r.Mark = cfg.TProxyMark
	r.Table = int(cfg.TProxyRouteTable)
	return r
}

func hasRule(r *netlink.Rule) (bool, error) {
	rules, err := netlink.RuleListFiltered(r.Family, r, netlink.RT_FILTER_MARK|netlink.RT_FILTER_TABLE)
	if err != nil {
		return false, fmt.Errorf("list ip rules: %w", err)
	}
	return len(rules) > 0, nil
}

// setupRouting installs what TPROXY needs, through netlink and idempotently:
// "ip rule add fwmark MARK lookup TABLE" and "ip route add local default dev
// lo table TABLE" per family.
func setupRouting(cfg *Policy, families []bool) error {
	for _, v6 := range families {
		rule := tproxyRule(cfg, v6)
		ok, err := hasRule(rule)
		if err != nil {
			return err
		}
		if !ok {
			if err := netlink.RuleAdd(rule); err != nil {
				return fmt.Errorf("add ip rule fwmark %d lookup %d: %w", cfg.TProxyMark, cfg.TProxyRouteTable, err)
			}
		}
		route, err := tproxyRoute(cfg, v6)
		if err != nil {
			return err
		}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("add local default route to table %d: %w", cfg.TProxyRouteTable, err)
		}
	}
	return nil
}

// cleanupRouting removes the TPROXY rule and route, if present.
func cleanupRouting(cfg *Policy) error {
	var errs []error
	for _, v6 := range []bool{false, true} {
		rule := tproxyRule(cfg, v6)
		for {
			ok, err := hasRule(rule)
			if err != nil || !ok {
				errs = append(errs, err)
				break
			}
			if err := netlink.RuleDel(rule); err != nil {
				errs = append(errs, fmt.Errorf("delete ip rule: %w", err))
				break
			}
		}
		route, err := tproxyRoute(cfg, v6)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := netlink.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete local default route from table %d: %w", cfg.TProxyRouteTable, err))
		}
	}
	return errors.Join(errs...)
}

// addPassthroughV6 puts ::6/128 on lo so the proxy can use it as a source.
func addPassthroughV6() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: passthroughV6.Addr().AsSlice(), Mask: net.CIDRMask(128, 128)}}
	if err := netlink.AddrReplace(lo, addr); err != nil {
		return fmt.Errorf("add %s to lo: %w", passthroughV6, err)
	}
	return nil
}

func removePassthroughV6() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: passthroughV6.Addr().AsSlice(), Mask: net.CIDRMask(128, 128)}}
	if err := netlink.AddrDel(lo, addr); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s from lo: %w", passthroughV6, err)
	}
	return nil
}
