package config

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// env reads the agent's variables: proxyMetadata entries first, then the
// process environment. Each parser records a bad value in errs and returns
// the zero value, so Load reports every bad variable at once.
type env struct {
	vars, meta map[string]string
	errs       []error
}

// str returns the variable's value, or def when it is unset or empty.
func (e *env) str(name, def string) string {
	if v, ok := e.meta[name]; ok {
		return v
	}
	if v := e.vars[name]; v != "" {
		return v
	}
	return def
}

// fail records that name's value cannot be used, and why.
func (e *env) fail(name, value, reason string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: %s", name, value, fmt.Sprintf(reason, args...)))
}

// boolean parses a boolean as strconv.ParseBool does (1, t, true, 0, f,
// false, ...), false when unset.
func (e *env) boolean(name string) bool { return e.booleanOr(name, false) }

// booleanOr is boolean with def when unset.
func (e *env) booleanOr(name string, def bool) bool {
	v := e.str(name, strconv.FormatBool(def))
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, v, "not a boolean (true or false)")
	}
	return b
}

// duration parses a positive Go duration ("24h", "90m").
func (e *env) duration(name, def string) time.Duration {
	v := e.str(name, def)
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.fail(name, v, "not a positive duration")
		return 0
	}
	return d
}

// ratio parses a number strictly between 0 and 1.
func (e *env) ratio(name, def string) float64 {
	v := e.str(name, def)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f >= 1 {
		e.fail(name, v, "not a ratio between 0 and 1")
		return 0
	}
	return f
}

// only accepts name unset or set to the one value Skiff supports.
func (e *env) only(name, supported string) {
	if v := e.str(name, supported); v != supported {
		e.fail(name, v, "not supported (only %s)", supported)
	}
}

// fraction parses a number from 0 up to, not including, 1.
func (e *env) fraction(name, def string) float64 {
	v := e.str(name, def)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f >= 1 {
		e.fail(name, v, "not a number from 0 to below 1")
		return 0
	}
	return f
}

// optionalDuration is duration with zero when unset.
func (e *env) optionalDuration(name string) time.Duration {
	if e.str(name, "") == "" {
		return 0
	}
	return e.duration(name, "")
}

// keyType reads the workload key's type from Istio's variables: the ECC
// signature algorithm (empty or ECDSA) and curve (P256 or P384), and the
// RSA key size (2048, 3072 or 4096); each is checked even when the other
// kind of key is chosen.
func (e *env) keyType(eccName, curveName, rsaName string) pki.KeyType {
	kt := pki.RSA2048
	switch v := e.str(rsaName, "2048"); v {
	case "2048":
	case "3072":
		kt = pki.RSA3072
	case "4096":
		kt = pki.RSA4096
	default:
		e.fail(rsaName, v, "not 2048, 3072 or 4096")
	}
	ecdsa := pki.ECDSAP256
	switch v := e.str(curveName, "P256"); v {
	case "P256":
	case "P384":
		ecdsa = pki.ECDSAP384
	default:
		e.fail(curveName, v, "not P256 or P384")
	}
	switch v := e.str(eccName, ""); v {
	case "":
	case "ECDSA":
		kt = ecdsa
	default:
		e.fail(eccName, v, "not a supported algorithm (ECDSA)")
	}
	return kt
}

// identity is the SPIFFE ID of the pod's service account.
func (e *env) identity(tdName, namespace, saName string) spiffe.ID {
	td := e.str(tdName, spiffe.DefaultTrustDomain)
	if err := spiffe.ValidateTrustDomain(td); err != nil {
		e.fail(tdName, td, "%v", err)
		return spiffe.ID{}
	}
	sa := e.str(saName, "default")
	id, err := spiffe.New(td, namespace, sa)
	if err != nil {
		// The trust domain is good: the namespace or the service account is not.
		e.errs = append(e.errs, fmt.Errorf("POD_NAMESPACE=%q, %s=%q: %w", namespace, saName, sa, err))
		return spiffe.ID{}
	}
	return id
}

// dnsAddrs parses a DNS proxy address in the spellings Istio's agent
// accepts: host:port where the host is an IP address, "localhost" (both
// loopback addresses, 127.0.0.1 and ::1) or empty (every address of both
// families, 0.0.0.0 and ::). Port 0 lets the DNS proxy pick one.
func (e *env) dnsAddrs(name, def string) []netip.AddrPort {
	v := e.str(name, def)
	addrs, err := parseDNSAddr(v)
	if err != nil {
		e.fail(name, v, "%v", err)
	}
	return addrs
}

// parseDNSAddr parses DNS_PROXY_ADDR's value (see Config.DNSAddrs): an IP
// address, "localhost" or nothing, a colon and a port.
func parseDNSAddr(s string) ([]netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("not host:port")
	}
	n, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q is not a number from 0 to 65535", portStr)
	}
	port := uint16(n)
	switch {
	case strings.EqualFold(host, "localhost"):
		return []netip.AddrPort{
			netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port),
			netip.AddrPortFrom(netip.IPv6Loopback(), port),
		}, nil
	case host == "":
		return []netip.AddrPort{
			netip.AddrPortFrom(netip.IPv4Unspecified(), port),
			netip.AddrPortFrom(netip.IPv6Unspecified(), port),
		}, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("host %q is not an IP address or localhost", host)
	}
	return []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), port)}, nil
}

// probers parses ISTIO_KUBE_APP_PROBERS (its errors name the variable and the probe).
func (e *env) probers(name string) map[string]*Prober {
	p, err := ParseProbers(e.str(name, ""))
	if err != nil {
		e.errs = append(e.errs, err)
	}
	return p
}

// scrape parses ISTIO_PROMETHEUS_ANNOTATIONS.
func (e *env) scrape(name string) *Scrape {
	v := e.str(name, "")
	s, err := parseScrape(v)
	if err != nil {
		e.fail(name, v, "%v", err)
	}
	return s
}

// labels parses a JSON object of strings.
func (e *env) labels(name string) map[string]string {
	v := e.str(name, "")
	if v == "" {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		e.fail(name, v, "not a JSON object of strings")
		return nil
	}
	return m
}
