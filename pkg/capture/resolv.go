package capture

import (
	"bufio"
	"fmt"
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
