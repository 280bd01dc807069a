package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

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
	r, err := dialRtnl()
	if err != nil {
		return err
	}
	defer r.close()
	if !p.EnableIPv6 && p.InboundMode != TProxy {
		return cleanupRouting(r, p)
	}
	lo, err := loIndex()
	if err != nil {
		return err
	}
	if p.EnableIPv6 {
		if err := addPassthroughV6(r, lo); err != nil {
			return err
		}
	}
	if p.InboundMode == TProxy {
		families := []uint8{unix.AF_INET}
		if p.EnableIPv6 {
			families = append(families, unix.AF_INET6)
		}
		return setupRouting(r, p, families, lo)
	}
	return cleanupRouting(r, p)
}

// Remove deletes the TPROXY routing of both families and ::6.
func (netlinkRouting) Remove(p *Policy) error {
	r, err := dialRtnl()
	if err != nil {
		return err
	}
	defer r.close()
	lo, err := loIndex()
	if err != nil {
		return errors.Join(cleanupRouting(r, p), err)
	}
	return errors.Join(cleanupRouting(r, p), removePassthroughV6(r, lo))
}

// loIndex is the index of lo in the calling thread's namespace.
func loIndex() (uint32, error) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return 0, fmt.Errorf("find lo: %w", err)
	}
	return uint32(lo.Index), nil
}

// fibHeader is the 12-byte header of rule and route messages (struct
// fib_rule_hdr and struct rtmsg share its layout): family, destination
// and source lengths, TOS, table (tables past 255 go in an attribute),
// protocol, scope, type (a rule's action), flags.
func fibHeader(family uint8, table uint32, protocol, scope, typ uint8) []byte {
	t := uint8(unix.RT_TABLE_UNSPEC)
	if table < 256 {
		t = uint8(table)
	}
	return []byte{family, 0, 0, 0, t, protocol, scope, typ, 0, 0, 0, 0}
}

// tproxyRule is "fwmark MARK lookup TABLE" for family.
func tproxyRule(cfg *Policy, family uint8) []byte {
	b := fibHeader(family, cfg.TProxyRouteTable, unix.RTPROT_BOOT, unix.RT_SCOPE_UNIVERSE, unix.FR_ACT_TO_TBL)
	b = appendAttrU32(b, unix.FRA_FWMARK, cfg.TProxyMark)
	if cfg.TProxyRouteTable >= 256 {
		b = appendAttrU32(b, unix.FRA_TABLE, cfg.TProxyRouteTable)
	}
	return b
}

// tproxyRoute is "local default dev lo table TABLE" for family.
func tproxyRoute(cfg *Policy, family uint8, lo uint32) []byte {
	b := fibHeader(family, cfg.TProxyRouteTable, unix.RTPROT_BOOT, unix.RT_SCOPE_HOST, unix.RTN_LOCAL)
	zero := make([]byte, 4)
	if family == unix.AF_INET6 {
		zero = make([]byte, 16)
	}
	b = appendAttr(b, unix.RTA_DST, zero)
	if cfg.TProxyRouteTable >= 256 {
		b = appendAttrU32(b, unix.RTA_TABLE, cfg.TProxyRouteTable)
	}
	return appendAttrU32(b, unix.RTA_OIF, lo)
}

// fibEntry is a rule or route from a dump: the message that deletes it
// (its header and the attributes that identify it), its table and, for a
// rule, its fwmark.
type fibEntry struct {
	del     []byte
	table   uint32
	mark    uint32
	hasMark bool
}

// parseFib reads a rule or route message of a dump, keeping the attributes
// of types keep. Rules and routes share the header's layout and the table
// attribute's number (FRA_TABLE is RTA_TABLE).
func parseFib(body []byte, keep ...uint16) (fibEntry, bool) {
	if len(body) < 12 {
		return fibEntry{}, false
	}
	e := fibEntry{del: append([]byte(nil), body[:12]...), table: uint32(body[4])}
	attrs(body[12:], func(typ uint16, data []byte) {
		if !slices.Contains(keep, typ) {
			return
		}
		if len(data) == 4 {
			switch typ {
			case unix.FRA_TABLE:
				e.table = binary.NativeEndian.Uint32(data)
			case unix.FRA_FWMARK:
				e.mark, e.hasMark = binary.NativeEndian.Uint32(data), true
			}
		}
		e.del = appendAttr(e.del, typ, data)
	})
	return e, true
}

// tproxyRules lists the TPROXY rules of family (AF_UNSPEC: both), each as
// the message that deletes it.
func tproxyRules(r *rtnl, cfg *Policy, family uint8) ([][]byte, error) {
	var found [][]byte
	err := r.dump(unix.RTM_GETRULE, fibHeader(family, 0, 0, 0, 0), func(body []byte) {
		e, ok := parseFib(body, unix.FRA_TABLE, unix.FRA_FWMARK, unix.FRA_FWMASK, unix.FRA_PRIORITY)
		if ok && e.hasMark && e.mark == cfg.TProxyMark && e.table == cfg.TProxyRouteTable {
			found = append(found, e.del)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list ip rules: %w", err)
	}
	return found, nil
}

// setupRouting installs what TPROXY needs, idempotently: "ip rule add
// fwmark MARK lookup TABLE" and "ip route add local default dev lo table
// TABLE" per family.
func setupRouting(r *rtnl, cfg *Policy, families []uint8, lo uint32) error {
	for _, family := range families {
		rules, err := tproxyRules(r, cfg, family)
		if err != nil {
			return err
		}
		if len(rules) == 0 {
			if err := r.do(unix.RTM_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, tproxyRule(cfg, family)); err != nil {
				return fmt.Errorf("add ip rule fwmark %d lookup %d: %w", cfg.TProxyMark, cfg.TProxyRouteTable, err)
			}
		}
		if err := r.do(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, tproxyRoute(cfg, family, lo)); err != nil {
			return fmt.Errorf("add local default route to table %d: %w", cfg.TProxyRouteTable, err)
		}
	}
	return nil
}

// cleanupRouting removes the TPROXY rules and routes of both families, if
// present: one dump of the rules and one of the routes, then a delete for
// each found (a fresh pod's namespace has none).
func cleanupRouting(r *rtnl, cfg *Policy) error {
	rules, err := tproxyRules(r, cfg, unix.AF_UNSPEC)
	if err != nil {
		return err
	}
	var errs []error
	for _, rule := range rules {
		if err := r.do(unix.RTM_DELRULE, 0, rule); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete ip rule: %w", err))
		}
	}
	var routes [][]byte
	err = r.dump(unix.RTM_GETROUTE, fibHeader(unix.AF_UNSPEC, 0, 0, 0, 0), func(body []byte) {
		if len(body) < 12 || body[1] != 0 || body[7] != unix.RTN_LOCAL {
			return // not a local default route
		}
		if e, ok := parseFib(body, unix.RTA_TABLE, unix.RTA_DST, unix.RTA_OIF, unix.RTA_PRIORITY); ok && e.table == cfg.TProxyRouteTable {
			routes = append(routes, e.del)
		}
	})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list routes of table %d: %w", cfg.TProxyRouteTable, err))...)
	}
	for _, route := range routes {
		if err := r.do(unix.RTM_DELROUTE, 0, route); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete local default route from table %d: %w", cfg.TProxyRouteTable, err))
		}
	}
	return errors.Join(errs...)
}

// passthroughAddr is the message for ::6/128 on lo (index lo).
func passthroughAddr(lo uint32) []byte {
	b := []byte{unix.AF_INET6, 128, 0, unix.RT_SCOPE_UNIVERSE}
	b = binary.NativeEndian.AppendUint32(b, lo)
	ip := passthroughV6.Addr().AsSlice()
	b = appendAttr(b, unix.IFA_LOCAL, ip)
	return appendAttr(b, unix.IFA_ADDRESS, ip)
}

// addPassthroughV6 puts ::6/128 on lo so the proxy can use it as a source.
func addPassthroughV6(r *rtnl, lo uint32) error {
	if err := r.do(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, passthroughAddr(lo)); err != nil {
		return fmt.Errorf("add %s to lo: %w", passthroughV6, err)
	}
	return nil
}

func removePassthroughV6(r *rtnl, lo uint32) error {
	if err := r.do(unix.RTM_DELADDR, 0, passthroughAddr(lo)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s from lo: %w", passthroughV6, err)
	}
	return nil
}
