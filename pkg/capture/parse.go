package capture

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// parsePort reads one port, 1..65535.
func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil || n == 0 || n > 65535 {
		return 0, fmt.Errorf("%q is not a port (1-65535)", s)
	}
	return uint16(n), nil
}

// parseRange reads a port or an inclusive range "lo:hi".
func parseRange(s string) (ipt.PortRange, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), ":")
	a, err := parsePort(lo)
	if err != nil {
		return ipt.PortRange{}, err
	}
	if !isRange {
		return ipt.Port(a), nil
	}
	b, err := parsePort(hi)
	if err != nil {
		return ipt.PortRange{}, err
	}
	if b < a {
		return ipt.PortRange{}, fmt.Errorf("port range %q ends before it starts", s)
	}
	return ipt.PortRange{Lo: a, Hi: b}, nil
}

// splitList splits a comma list, dropping empty items and surrounding spaces.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParsePortList reads a comma list of ports and ranges; "" is the empty list.
func ParsePortList(s string) ([]ipt.PortRange, error) {
	var out []ipt.PortRange
	for _, f := range splitList(s) {
		r, err := parseRange(f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ParsePorts reads a capture set: "*" for all ports, else a port list.
func ParsePorts(s string) (Ports, error) {
	if strings.TrimSpace(s) == "*" {
		return Ports{All: true}, nil
	}
	r, err := ParsePortList(s)
	return Ports{Ranges: r}, err
}

// ParseCIDRList reads a comma list of CIDRs of either family.
func ParseCIDRList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range splitList(s) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ParseCIDRs reads a capture set: "*" for all destinations, else a CIDR list.
func ParseCIDRs(s string) (CIDRs, error) {
	if strings.TrimSpace(s) == "*" {
		return CIDRs{All: true}, nil
	}
	p, err := ParseCIDRList(s)
	return CIDRs{Prefixes: p}, err
}

// parseIDs reads a comma list of numeric uids or gids.
func parseIDs(s string) ([]uint32, error) {
	var out []uint32
	for _, f := range splitList(s) {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a numeric id", f)
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

// ParseMode reads an inbound interception mode as Istio does: TPROXY
// exactly is TPROXY; REDIRECT, and "tproxy" in any other letter case, are
// REDIRECT (Istio 1.31 compares with "TPROXY" and redirects otherwise; see
// SpelledAsRedirect). Anything else is an error.
func ParseMode(s string) (InterceptionMode, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == string(TProxy):
		return TProxy, nil
	case strings.EqualFold(s, string(Redirect)), strings.EqualFold(s, string(TProxy)):
		return Redirect, nil
	}
	return "", fmt.Errorf("%q is not an interception mode (REDIRECT or TPROXY)", s)
}

// SpelledAsRedirect reports whether s asks for TPROXY in a letter case that
// Istio, and so Skiff, takes as REDIRECT: worth telling the user.
func SpelledAsRedirect(s string) bool {
	s = strings.TrimSpace(s)
	return s != string(TProxy) && strings.EqualFold(s, string(TProxy))
}

// ParseInterfaces reads a comma list of interface names.
func ParseInterfaces(s string) ([]string, error) {
	out := splitList(s)
	for _, n := range out {
		if len(n) > 15 || strings.ContainsAny(n, "/ \t!:") {
			return nil, fmt.Errorf("%q is not an interface name", n)
		}
	}
	return out, nil
}

// parseLoopback reads the IPv4 loopback prefix: inside 127.0.0.0/8, length 8 to 32.
func parseLoopback(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || !p.Addr().Is4() || !p.Addr().IsLoopback() || p.Bits() < 8 {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 loopback CIDR (127.0.0.0/8, /8 to /32)", s)
	}
	return p, nil
}
