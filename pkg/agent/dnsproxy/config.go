package dnsproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"time"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultPort           = 15053
	DefaultClusterDomain  = "cluster.local"
	DefaultTimeout        = 4 * time.Second
	DefaultAttemptTimeout = time.Second
	DefaultAttempts       = 2
	DefaultCacheSize      = 10000
	DefaultCacheMaxTTL    = 5 * time.Minute
	DefaultMaxTCPConns    = 256
	DefaultTCPIdleTimeout = 10 * time.Second
	DefaultMaxInflight    = 1024
)

// DefaultAddrs returns the addresses Istio's DNS proxy listens on:
// 127.0.0.1:15053 and [::1]:15053.
func DefaultAddrs() []netip.AddrPort {
	return []netip.AddrPort{
		netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), DefaultPort),
		netip.AddrPortFrom(netip.IPv6Loopback(), DefaultPort),
	}
}

// Config configures a Server. The zero value of every field means its
// default; New validates the result.
type Config struct {
	// Addrs are the addresses served over both UDP and TCP (default
	// DefaultAddrs). Port 0 picks one free port, shared by every address;
	// Server.Addrs reports it. A default IPv6 address that cannot be bound
	// (IPv6 disabled) is skipped with a warning.
	Addrs []netip.AddrPort
	// UDPReaders is the number of SO_REUSEPORT sockets, each with its own
	// reader, per UDP address (default GOMAXPROCS).
	UDPReaders int

	// Upstreams are the nameservers non-mesh queries are forwarded to, in
	// order of preference (from resolv.conf). None means SERVFAIL for
	// every non-mesh query.
	Upstreams []netip.AddrPort
	// SearchDomains is the pod's resolv.conf search list. The first entry
	// gets the CNAME shortcut for search-list walks.
	SearchDomains []string
	// Namespace is the pod's namespace: short service names ("reviews.")
	// are answered only for services in it.
	Namespace string
	// ClusterDomain is the Kubernetes cluster domain (default cluster.local).
	ClusterDomain string

	// ForwardParallel sends each forwarded query to every upstream at once
	// and takes the first good answer (pilot-agent's DNS_FORWARD_PARALLEL).
	ForwardParallel bool
	// Timeout bounds the time spent on one forwarded query across all
	// retries; when it runs out the client gets SERVFAIL (default 4s).
	Timeout time.Duration
	// AttemptTimeout bounds one attempt at one upstream before the next is
	// tried (default 1s).
	AttemptTimeout time.Duration
	// Attempts is the number of rounds over the upstreams (default 2).
	Attempts int

	// CacheSize bounds the number of cached upstream answers (default
	// 10000); a negative value disables the cache.
	CacheSize int
	// CacheMaxTTL caps how long an upstream answer is cached (default 5m).
	CacheMaxTTL time.Duration

	// MaxTCPConns bounds concurrent client TCP connections (default 256).
	MaxTCPConns int
	// TCPIdleTimeout closes client TCP connections idle this long, and
	// bounds the time to receive one whole query (default 10s).
	TCPIdleTimeout time.Duration
	// MaxInflight bounds queries waiting for an upstream at once; beyond it
	// new ones are dropped (default 1024).
	MaxInflight int
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if len(c.Addrs) == 0 {
		c.Addrs = DefaultAddrs()
	}
	if c.UDPReaders == 0 {
		c.UDPReaders = runtime.GOMAXPROCS(0)
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = DefaultClusterDomain
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.Attempts == 0 {
		c.Attempts = DefaultAttempts
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.CacheMaxTTL == 0 {
		c.CacheMaxTTL = DefaultCacheMaxTTL
	}
	if c.MaxTCPConns == 0 {
		c.MaxTCPConns = DefaultMaxTCPConns
	}
	if c.TCPIdleTimeout == 0 {
		c.TCPIdleTimeout = DefaultTCPIdleTimeout
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	return c
}

// validate reports the first invalid field of a defaulted config.
func (c Config) validate() error {
	var errs []error
	for _, a := range c.Addrs {
		if !a.IsValid() {
			errs = append(errs, fmt.Errorf("listen address %v is invalid", a))
		}
	}
	for _, u := range c.Upstreams {
		if !u.IsValid() || u.Port() == 0 {
			errs = append(errs, fmt.Errorf("upstream %v is invalid", u))
		}
	}
	if c.UDPReaders < 1 || c.UDPReaders > 64 {
		errs = append(errs, fmt.Errorf("UDPReaders %d out of range 1..64", c.UDPReaders))
	}
	for name, d := range map[string]time.Duration{
		"Timeout": c.Timeout, "AttemptTimeout": c.AttemptTimeout,
		"CacheMaxTTL": c.CacheMaxTTL, "TCPIdleTimeout": c.TCPIdleTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", name, d))
		}
	}
	if c.Attempts < 1 {
		errs = append(errs, fmt.Errorf("attempts %d is below 1", c.Attempts))
	}
	if c.MaxTCPConns < 1 || c.MaxInflight < 1 {
		errs = append(errs, fmt.Errorf("MaxTCPConns %d and MaxInflight %d must be positive", c.MaxTCPConns, c.MaxInflight))
	}
	if strings.Trim(c.ClusterDomain, ".") == "" {
		errs = append(errs, fmt.Errorf("cluster domain %q is empty", c.ClusterDomain))
	}
	return errors.Join(errs...)
}
