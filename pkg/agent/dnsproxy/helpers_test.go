package dnsproxy

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// testSearch is the search list of a pod in namespace default.
var testSearch = []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}

// testTable is a small mesh: services in default and other, a ServiceEntry,
// a wildcard ServiceEntry and a headless service with its pods.
func testTable() *nds.NameTable {
	k8s := func(short, ns string, ips ...string) *nds.NameTable_NameInfo {
		return &nds.NameTable_NameInfo{Ips: ips, Registry: "Kubernetes", Shortname: short, Namespace: ns}
	}
	return &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{
		"reviews.default.svc.cluster.local":     k8s("reviews", "default", "10.0.0.1", "fd00::1"),
		"productpage.default.svc.cluster.local": k8s("productpage", "default", "10.0.0.2", "10.0.0.3", "10.0.0.4"),
		"ratings.other.svc.cluster.local":       k8s("ratings", "other", "10.0.1.1"),
		"db.default.svc.cluster.local":          k8s("db", "default", "10.1.0.10", "10.1.0.11"),
		"db-0.db.default.svc.cluster.local":     k8s("db-0.db", "default", "10.1.0.10"),
		"db-1.db.default.svc.cluster.local":     k8s("db-1.db", "default", "10.1.0.11"),
		"api.example.com":                       {Ips: []string{"240.240.0.1"}, Registry: "External"},
		"*.wild.example.org":                    {Ips: []string{"240.240.0.2", "240.240.0.3"}, Registry: "External"},
		"v6only.example.com":                    {Ips: []string{"2001:db8::5"}, Registry: "External"},
		"alias.example.com":                     {Ips: []string{"240.240.0.9"}, AltHosts: []string{"alias2.example.com"}},
	}}
}

// testConfig listens on a free port of 127.0.0.1 and [::1] and forwards to
// upstreams.
func testConfig(upstreams ...netip.AddrPort) Config {
	return Config{
		Addrs:          []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("[::1]:0")},
		UDPReaders:     2,
		Upstreams:      upstreams,
		SearchDomains:  testSearch,
		Namespace:      "default",
		Timeout:        2 * time.Second,
		AttemptTimeout: 500 * time.Millisecond,
	}
}

// testLogger logs to the test output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// countSeries parses what reg writes with Prometheus' parser and counts
// the series of the named families (of all families without names), as
// client_golang's testutil.GatherAndCount does.
func countSeries(reg *promtext.Registry, names ...string) (int, error) {
	var b strings.Builder
	if err := reg.WriteText(&b); err != nil {
		return 0, err
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		return 0, err
	}
	n := 0
	for name, mf := range mfs {
		if len(names) == 0 || slices.Contains(names, name) {
			n += len(mf.Metric)
		}
	}
	return n, nil
}

// startServer starts a proxy with cfg and the test table, stopped at cleanup.
func startServer(t testing.TB, cfg Config, reg *promtext.Registry) *Server {
	t.Helper()
	s, err := New(cfg, testLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateTable(testTable())
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// addr4 returns the server's IPv4 address as host:port.
func addr4(s *Server) string {
	for _, a := range s.Addrs() {
		if a.Addr().Is4() {
			return a.String()
		}
	}
	return ""
}

// ask sends one query with the miekg/dns client over network.
func ask(t testing.TB, network, server, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	r, err := exchangeMsg(network, server, name, qtype, edns)
	if err != nil {
		t.Fatalf("query %s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return r
}

func exchangeMsg(network, server, name string, qtype uint16, edns uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	if edns > 0 {
		c.UDPSize = edns
	}
	r, _, err := c.Exchange(m, server)
	return r, err
}

// addrsOf returns the A/AAAA addresses of an answer, in order.
func addrsOf(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	return out
}

// randomLoopback returns a random address in 127.0.0.0/8, away from the
// well-known ones, so parallel tests do not collide.
func randomLoopback() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(10 + rand.IntN(200)), byte(rand.IntN(256)), byte(2 + rand.IntN(250))})
}

// freeUDPPort returns an address with a port free for UDP and TCP right now.
func freeUDPPort(t testing.TB, ip netip.Addr) netip.AddrPort {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		a := pc.LocalAddr().(*net.UDPAddr).AddrPort()
		l, err := net.Listen("tcp", a.String())
		_ = pc.Close()
		if err == nil {
			_ = l.Close()
			return a
		}
	}
	t.Fatal("no free port")
	return netip.AddrPort{}
}

// dnsmasq is a dnsmasq process started by a test.
type dnsmasq struct {
	Addr netip.AddrPort
	cmd  *exec.Cmd
	once sync.Once
	done chan struct{}
}

// startDnsmasq runs dnsmasq on a fresh loopback address with extra
// arguments (records), killed at cleanup.
func startDnsmasq(t testing.TB, extra ...string) *dnsmasq {
	t.Helper()
	if _, err := exec.LookPath("dnsmasq"); err != nil {
		t.Skip("dnsmasq not installed")
	}
	d := &dnsmasq{Addr: freeUDPPort(t, randomLoopback()), done: make(chan struct{})}
	// --keep-in-foreground, not --no-daemon: TCP connections are served by
	// child processes as in production, not in the main loop, so a client
	// holding one open does not stall UDP.
	args := append([]string{"--keep-in-foreground", "--port=" + fmt.Sprint(d.Addr.Port()),
		"--listen-address=" + d.Addr.Addr().String(), "--bind-interfaces", "--no-resolv", "--no-hosts",
		"--conf-file=/dev/null", "--pid-file=", "--user=root", "--log-facility=-", "--cache-size=0"}, extra...)
	d.cmd = exec.Command("dnsmasq", args...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Kill ends its TCP children too
	out := &strings.Builder{}
	d.cmd.Stdout, d.cmd.Stderr = out, out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start dnsmasq: %v", err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(d.Kill)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := exchangeMsg("udp", d.Addr.String(), "probe.invalid.", dns.TypeA, 0); err == nil {
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("dnsmasq exited: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq did not come up: %s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops dnsmasq and waits for it to exit.
func (d *dnsmasq) Kill() {
	d.once.Do(func() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	})
}

// blackhole returns an upstream address that reads queries and never
// answers, closed at cleanup.
func blackhole(t testing.TB) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", netip.AddrPortFrom(randomLoopback(), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// requireTool skips the test when a binary is missing.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}

// answerMsg serves a as the answer to the question key (a lookup key),
// aged by age, or with a target as the answer to an alias of it, and
// unpacks it with miekg/dns, the reference decoder.
func answerMsg(t testing.TB, a *answer, age time.Duration, key string, target []byte) *dns.Msg {
	t.Helper()
	pkt := make([]byte, headerLen, headerLen+len(key)+2)
	pkt[5] = 1
	pkt = append(append(pkt, key...), 0, classINET)
	q := query{qEnd: len(pkt), do: true} // do: keep the AD bit
	m := new(dns.Msg)
	if err := m.Unpack(serve(a, &q, pkt, age, target, maxMsgSize)); err != nil {
		t.Fatalf("unpack the answer to %q: %v", key, err)
	}
	return m
}

// cachePut caches resp as an upstream's answer to the question in key, as
// the forward path does, and reports whether it was cacheable.
func cachePut(t testing.TB, c *cache, key []byte, resp *dns.Msg, now time.Duration) bool {
	t.Helper()
	resp.Response = true
	wire, err := resp.Pack()
	if err != nil {
		t.Fatal(err)
	}
	a, ttl := upstreamAnswer(wire)
	if ttl == 0 {
		return false
	}
	c.putAnswer(key, a, ttl, now)
	return true
}
