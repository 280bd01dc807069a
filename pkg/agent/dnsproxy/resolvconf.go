package dnsproxy

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// ResolvConf is what the proxy needs from a resolv.conf file.
type ResolvConf struct {
	// Nameservers are the "nameserver" lines, port 53, in file order.
	Nameservers []netip.AddrPort
	// Search is the search list (the last "search" or "domain" line wins,
	// as in glibc).
	Search []string
	// Ndots, Timeout and Attempts are from the "options" line (glibc
	// defaults 1, 5s and 2 when absent).
	Ndots    int
	Timeout  time.Duration
	Attempts int
}

// ReadResolvConf parses the resolv.conf file at path.
func ReadResolvConf(path string) (ResolvConf, error) {
	f, err := os.Open(path)
	if err != nil {
		return ResolvConf{}, fmt.Errorf("read resolv.conf: %w", err)
	}
	defer f.Close()
	rc, err := ParseResolvConf(f)
	if err != nil {
		return ResolvConf{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return rc, nil
}

// ParseResolvConf parses resolv.conf content. Unknown lines and options are
// ignored, as the C library does; a nameserver that is not an IP address is
// an error, since silently losing an upstream is worse.
func ParseResolvConf(r io.Reader) (ResolvConf, error) {
	rc := ResolvConf{Ndots: 1, Timeout: 5 * time.Second, Attempts: 2}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexAny(text, "#;"); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return rc, fmt.Errorf("line %d: nameserver without address", line)
			}
			ip, err := netip.ParseAddr(fields[1])
			if err != nil {
				return rc, fmt.Errorf("line %d: nameserver %q: %w", line, fields[1], err)
			}
			rc.Nameservers = append(rc.Nameservers, netip.AddrPortFrom(ip.Unmap(), 53))
		case "search", "domain":
			rc.Search = nil
			for _, d := range fields[1:] {
				if d = strings.Trim(d, "."); d != "" {
					rc.Search = append(rc.Search, strings.ToLower(d))
				}
			}
		case "options":
			for _, o := range fields[1:] {
				rc.applyOption(o)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rc, fmt.Errorf("scan: %w", err)
	}
	return rc, nil
}

// applyOption applies one "options" item, ignoring malformed ones like glibc.
func (rc *ResolvConf) applyOption(o string) {
	name, val, ok := strings.Cut(o, ":")
	if !ok {
		return
	}
	n, err := strconv.Atoi(val)
	if err != nil || n < 0 {
		return
	}
	switch name {
	case "ndots":
		rc.Ndots = min(n, 15)
	case "timeout":
		rc.Timeout = time.Duration(min(max(n, 1), 30)) * time.Second
	case "attempts":
		rc.Attempts = min(max(n, 1), 5)
	}
}

// ConfigFromResolvConf returns a Config whose upstreams and search domains
// come from the resolv.conf file at path; every other field is left at its
// default.
func ConfigFromResolvConf(path string) (Config, error) {
	rc, err := ReadResolvConf(path)
	if err != nil {
		return Config{}, err
	}
	return Config{Upstreams: rc.Nameservers, SearchDomains: rc.Search}, nil
}
