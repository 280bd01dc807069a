package capture

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// Nameservers returns the IPv4 and IPv6 nameservers listed in a resolv.conf file.
func Nameservers(path string) (v4, v6 []netip.Addr, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read nameservers: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err != nil {
			continue // resolvers skip what they cannot read; so do we
		}
		a = a.WithZone("")
		if a.Is4() || a.Is4In6() {
			v4 = append(v4, a.Unmap())
		} else {
			v6 = append(v6, a)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return v4, v6, nil
}

// PodIPv6 reports whether Istio's istio-iptables programs IPv6 for a pod
// whose interface addresses are addrs, in the kernel's order: it skips
// loopback and link-local addresses (and Envoy's passthrough source ::6,
// which an earlier run put on lo) and looks at the first address left.
// Without dual stack IPv6 is programmed only when that first address is
// IPv6: a pod whose first address is IPv4 gets IPv4 rules only, even if it
// has an IPv6 address too. With dual stack any such IPv6 address turns it on.
func PodIPv6(addrs []netip.Addr, dualStack bool) bool {
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a == envoyPassthroughV6 {
			continue
		}
		if a.Is6() {
			return true
		}
		if !dualStack {
			return false
		}
	}
	return false
}

// envoyPassthroughV6 is the source of Envoy's IPv6 inbound passthrough,
// which a run that programs IPv6 adds to lo.
var envoyPassthroughV6 = netip.MustParseAddr("::6")

// InterfaceAddrs lists the calling thread's namespace's interface addresses
// in the kernel's order, as Istio reads them to decide on IPv6 (PodIPv6).
func InterfaceAddrs() ([]netip.Addr, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list interface addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range ifAddrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}
