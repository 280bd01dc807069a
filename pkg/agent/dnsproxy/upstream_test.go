package dnsproxy

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// bigTXT are the strings of a TXT record of about 1.5 kB.
var bigTXT = []string{
	strings.Repeat("a", 250), strings.Repeat("b", 250), strings.Repeat("c", 250),
	strings.Repeat("d", 250), strings.Repeat("e", 250), strings.Repeat("f", 250),
}

// dnsmasqRecords are the records the real upstream serves.
func dnsmasqRecords() []string {
	return []string{
		"--local-ttl=60",
		"--host-record=ext.test,192.0.2.7,2001:db8::7",
		"--host-record=other.test,192.0.2.8",
		"--host-record=third.test,192.0.2.9",
		"--txt-record=big.test," + strings.Join(bigTXT, ","),
		"--local=/test/",
	}
}

func TestForwardLargeAnswer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxUDP      string // dnsmasq's --edns-packet-max
		upstreamTCP uint64
	}{
		// dnsmasq answers over UDP up to 1232 bytes by default: the proxy
		// gets TC and asks again over TCP.
		{"upstream-tcp-fallback", "1232", 1},
		// With a 4096-byte limit upstream, the client's 4096-byte buffer is
		// passed on and the answer comes over UDP in one go.
		{"upstream-udp", "4096", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startDnsmasq(t, append(dnsmasqRecords(), "--edns-packet-max="+tc.maxUDP)...)
			s := startServer(t, testConfig(up.Addr), nil)
			check := func(t *testing.T, r *dns.Msg) {
				t.Helper()
				if r.Rcode != dns.RcodeSuccess || r.Truncated || len(r.Answer) != 1 {
					t.Fatalf("want the whole TXT answer, got rcode %s tc=%v\n%v", dns.RcodeToString[r.Rcode], r.Truncated, r)
				}
				if got := r.Answer[0].(*dns.TXT).Txt; strings.Join(got, "|") != strings.Join(bigTXT, "|") {
					t.Fatalf("TXT changed on the way: %q", got)
				}
				if n := r.Len(); n <= 1200 {
					t.Fatalf("answer is only %d bytes; the test needs > 1200", n)
				}
			}
			check(t, ask(t, "udp", addr4(s), "big.test", dns.TypeTXT, 4096))
			if got := s.fwd.ups[0].reqTCP.Value(); got != tc.upstreamTCP {
				t.Errorf("upstream TCP requests %v, want %v", got, tc.upstreamTCP)
			}
			check(t, ask(t, "tcp", addr4(s), "big.test", dns.TypeTXT, 0))
			check(t, ask(t, "udp", addr4(s), "big.test", dns.TypeTXT, 4096)) // from the cache
			r := ask(t, "udp", addr4(s), "big.test", dns.TypeTXT, 0)
			if !r.Truncated || r.Rcode != dns.RcodeSuccess || r.Len() > dns.MinMsgSize {
				t.Fatalf("a client without EDNS should get TC within 512 bytes, got %d bytes %v", r.Len(), r)
			}
			r = ask(t, "udp", addr4(s), "big.test", dns.TypeTXT, 1232)
			if !r.Truncated || r.IsEdns0() == nil || r.Len() > 1232 {
				t.Fatalf("a 1232-byte EDNS client should get TC and an OPT, got %v", r)
			}
		})
	}
}

func TestForwardAndCache(t *testing.T) {
	up := startDnsmasq(t, dnsmasqRecords()...)
	reg := promtext.NewRegistry()
	s := startServer(t, testConfig(up.Addr), reg)
	for _, network := range []string{"udp", "tcp", "udp"} {
		r := ask(t, network, addr4(s), "ext.test", dns.TypeA, 0)
		if got := addrsOf(r); len(got) != 1 || got[0] != "192.0.2.7" || r.Answer[0].Header().Ttl > 60 {
			t.Fatalf("ext.test over %s: %v", network, r)
		}
		if r.Authoritative {
			t.Errorf("a forwarded answer must not claim authority")
		}
	}
	if got := s.m.cacheHits.Value(); got != 2 {
		t.Errorf("cache hits %v, want 2", got)
	}
	if got := s.fwd.ups[0].reqUDP.Value(); got != 1 {
		t.Errorf("upstream requests %v, want 1", got)
	}
	// The cache answers after the upstream is gone.
	up.Kill()
	r := ask(t, "udp", addr4(s), "EXT.test", dns.TypeA, 0)
	if got := addrsOf(r); len(got) != 1 || r.Question[0].Name != "EXT.test." {
		t.Fatalf("cached answer after upstream died: %v", r)
	}
}

func TestUpstreamKilledServfail(t *testing.T) {
	up := startDnsmasq(t, dnsmasqRecords()...)
	cfg := testConfig(up.Addr)
	s := startServer(t, cfg, nil)
	if r := ask(t, "udp", addr4(s), "ext.test", dns.TypeA, 0); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("before kill: %v", r)
	}
	up.Kill()
	for _, network := range []string{"udp", "tcp"} {
		start := time.Now()
		r := ask(t, network, addr4(s), "other.test", dns.TypeA, 0)
		took := time.Since(start)
		if r.Rcode != dns.RcodeServerFailure {
			t.Errorf("%s: want SERVFAIL, got %v", network, r)
		}
		if took > cfg.Timeout {
			t.Errorf("%s: SERVFAIL after %v, configured timeout %v", network, took, cfg.Timeout)
		}
	}
}

func TestAllUpstreamsSilentServfailWithinTimeout(t *testing.T) {
	cfg := testConfig(blackhole(t), blackhole(t))
	s := startServer(t, cfg, nil)
	start := time.Now()
	r := ask(t, "udp", addr4(s), "ext.test", dns.TypeA, 0)
	took := time.Since(start)
	if r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("want SERVFAIL, got %v", r)
	}
	// Functional bound (the configured timeout), not a performance check.
	if took > cfg.Timeout || took < cfg.AttemptTimeout {
		t.Errorf("SERVFAIL after %v; want between one attempt (%v) and the timeout (%v)", took, cfg.AttemptTimeout, cfg.Timeout)
	}
}

func TestFailoverToSecondUpstream(t *testing.T) {
	up := startDnsmasq(t, dnsmasqRecords()...)
	for _, tc := range []struct {
		name     string
		first    netip.AddrPort
		parallel bool
	}{
		{"silent-first", blackhole(t), false},
		{"refusing-first", freeUDPPort(t, randomLoopback()), false},
		{"parallel", blackhole(t), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(tc.first, up.Addr)
			cfg.ForwardParallel = tc.parallel
			s := startServer(t, cfg, nil)
			for i, name := range []string{"ext.test", "other.test", "third.test"} {
				start := time.Now()
				r := ask(t, "udp", addr4(s), name, dns.TypeA, 0)
				took := time.Since(start)
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
					t.Fatalf("%s: %v", name, r)
				}
				// The first query may wait one attempt on the dead server,
				// never the whole timeout; later ones go to the live
				// server first (or race it).
				limit := cfg.Timeout / 2
				if i > 0 || tc.parallel {
					limit = cfg.AttemptTimeout
				}
				if took >= limit {
					t.Errorf("%s answered after %v, want under %v", name, took, limit)
				}
			}
		})
	}
}
