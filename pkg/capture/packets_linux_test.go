package capture

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/origdst"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// pod is a "pod" namespace joined by a veth to a "peer" namespace that has
// two addresses, so tests can send real packets both ways.
type pod struct {
	pod, peer     *netnstest.NS
	podIP, peerIP netip.Addr
	peerIP2       netip.Addr
	podIf, peerIf string
}

func newPod(t *testing.T) *pod {
	t.Helper()
	p := &pod{pod: netnstest.New(t), peer: netnstest.New(t)}
	p.podIP, p.peerIP, p.peerIP2 = netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.0.3")
	p.podIf, p.peerIf = netnstest.Veth(t, p.pod, p.peer, "10.77.0.2/24", "10.77.0.1/24")
	p.peer.Exec(t, "ip", "addr", "add", "10.77.0.3/24", "dev", p.peerIf)
	return p
}

// listener is a TCP listener in a namespace that reports, for each
// connection, the original destination it was sent to.
type listener struct {
	ln   *net.TCPListener
	conn chan netip.AddrPort
}

func listen(t *testing.T, ns *netnstest.NS, addr string) *listener {
	t.Helper()
	l := &listener{conn: make(chan netip.AddrPort, 8)}
	ns.Do(t, func() error {
		// Right after the validation probe, binding its port has failed
		// with EADDRINUSE about once in 30 runs, though ss then shows no
		// socket on it: wait for the port rather than fail.
		var err error
		polltest.Wait(5*time.Second, func() bool {
			var ln net.Listener
			if ln, err = net.Listen("tcp", addr); err == nil {
				l.ln = ln.(*net.TCPListener)
			}
			return !errors.Is(err, syscall.EADDRINUSE)
		})
		return err
	})
	t.Cleanup(func() { l.ln.Close() })
	go func() {
		for {
			c, err := l.ln.AcceptTCP()
			if err != nil {
				return
			}
			dst, err := origdst.Of(c)
			if err != nil { // not redirected: the destination is the local address
				dst = c.LocalAddr().(*net.TCPAddr).AddrPort()
			}
			l.conn <- netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
			c.Close()
		}
	}()
	return l
}

// expect asserts that l, and no other of the listeners, accepts a connection with that original destination.
func expect(t *testing.T, what string, l *listener, want netip.AddrPort, others ...*listener) {
	t.Helper()
	select {
	case got := <-l.conn:
		if got != want {
			t.Errorf("%s: original destination %s, want %s", what, got, want)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("%s: no connection reached %s", what, l.ln.Addr())
	}
	for _, o := range others {
		select {
		case got := <-o.conn:
			t.Errorf("%s: %s also got a connection to %s", what, o.ln.Addr(), got)
		default:
		}
	}
}

// dial connects from a namespace as root (an ordinary app: not the proxy uid).
func dial(t *testing.T, ns *netnstest.NS, dst netip.AddrPort) {
	t.Helper()
	ns.Do(t, func() error {
		c, err := net.DialTimeout("tcp", dst.String(), 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

func dialAsProxy(t *testing.T, ns *netnstest.NS, dst netip.AddrPort) {
	t.Helper()
	ns.Do(t, func() error {
		c, err := origdst.DialAs(dst, 1337, 1337, 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// dnsServer answers every A query with ip, over UDP and TCP, on addr in ns.
// With asProxy its sockets belong to the proxy uid, as the agent's do.
func dnsServer(t *testing.T, ns *netnstest.NS, addr string, ip string, asProxy bool) {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		rr, _ := dns.NewRR(r.Question[0].Name + " 30 IN A " + ip)
		m.Answer = append(m.Answer, rr)
		_ = w.WriteMsg(m)
	})
	for _, network := range []string{"udp", "tcp"} {
		srv := &dns.Server{Net: network, Handler: h}
		ns.Do(t, func() (err error) {
			if network == "udp" && asProxy {
				srv.PacketConn, err = origdst.ListenUDPAs(netip.MustParseAddrPort(addr), 1337, 1337)
			} else if network == "udp" {
				srv.PacketConn, err = net.ListenPacket("udp", addr)
			} else {
				srv.Listener, err = net.Listen("tcp", addr)
			}
			return err
		})
		go func() { _ = srv.ActivateAndServe() }()
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
}

// query resolves name against server from ns, as uid (0 for an app) and returns the A record.
func query(t *testing.T, ns *netnstest.NS, network, server string, asProxy bool) string {
	t.Helper()
	var answer string
	ns.Do(t, func() error {
		m := new(dns.Msg)
		m.SetQuestion("reviews.default.svc.cluster.local.", dns.TypeA)
		var conn net.Conn
		var err error
		if asProxy && network == "tcp" {
			var c *net.TCPConn
			c, err = origdst.DialAs(netip.MustParseAddrPort(server), 1337, 1337, 5*time.Second)
			conn = c
		} else if asProxy {
			conn, err = origdst.DialUDPAs(netip.MustParseAddrPort(server), 1337, 1337)
		} else {
			conn, err = net.DialTimeout(network, server, 5*time.Second)
		}
		if err != nil {
			return err
		}
		co := &dns.Conn{Conn: conn}
		defer co.Close()
		_ = co.SetDeadline(time.Now().Add(5 * time.Second))
		if err := co.WriteMsg(m); err != nil {
			return err
		}
		r, err := co.ReadMsg()
		if err != nil {
			return err
		}
		if len(r.Answer) != 1 {
			return errors.New("no answer")
		}
		answer = r.Answer[0].(*dns.A).A.String()
		return nil
	})
	return answer
}

// TestCaptureWithRealPackets is the real-packet check every backend passes:
// the injector's rules plus DNS capture, an excluded port and CIDR.
// Validation fails before any rule exists and passes after apply; after
// cleanup nothing is captured any more.
func TestCaptureWithRealPackets(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t)
			cfg := Injector()
			cfg.RedirectDNS = true
			cfg.OutboundExcludePorts = []ipt.PortRange{ipt.Port(3306)}
			cfg.OutboundExcludeCIDR = []netip.Prefix{netip.PrefixFrom(p.peerIP2, 32)}
			cfg.DNSServersV4 = []netip.Addr{p.peerIP}

			status := listen(t, p.pod, ":15020")
			server := listen(t, p.peer, ":8080")
			mysql := listen(t, p.peer, ":3306")
			dnsServer(t, p.pod, "127.0.0.1:15053", "10.0.0.53", true)          // the agent's DNS proxy
			dnsServer(t, p.peer, p.peerIP.String()+":53", "192.0.2.99", false) // the pod's resolv.conf server

			// Validation fails without rules (the probe's connection is refused).
			probe := cfg
			probe.SkipRuleApply, probe.RunValidation, probe.ProbeTimeout = true, true, time.Second
			if err := runWith(p.pod, &probe, b, testLog(t)); !errors.Is(err, ErrValidation) {
				t.Errorf("validation without rules: %v, want ErrValidation", err)
			}
			withValidation := cfg
			withValidation.RunValidation = true
			applyWith(t, p.pod, &withValidation, b)
			outbound := listen(t, p.pod, ":15001")
			inbound := listen(t, p.pod, ":15006")

			peer := netip.AddrPortFrom(p.peerIP, 8080)
			dial(t, p.pod, peer)
			expect(t, "app outbound", outbound, peer, server)
			dialAsProxy(t, p.pod, peer)
			expect(t, "proxy uid outbound", server, peer, outbound)
			dial(t, p.pod, netip.AddrPortFrom(p.peerIP, 3306))
			expect(t, "excluded outbound port", mysql, netip.AddrPortFrom(p.peerIP, 3306), outbound)
			dial(t, p.pod, netip.AddrPortFrom(p.peerIP2, 8080))
			expect(t, "excluded CIDR", server, netip.AddrPortFrom(p.peerIP2, 8080), outbound)

			podApp := netip.AddrPortFrom(p.podIP, 9080)
			dial(t, p.peer, podApp)
			expect(t, "inbound", inbound, podApp)
			dial(t, p.peer, netip.AddrPortFrom(p.podIP, 15020))
			expect(t, "excluded inbound port", status, netip.AddrPortFrom(p.podIP, 15020), inbound)

			ns := p.peerIP.String() + ":53"
			for _, network := range []string{"udp", "tcp"} {
				if got := query(t, p.pod, network, ns, false); got != "10.0.0.53" {
					t.Errorf("app DNS over %s answered by %s, want the agent (10.0.0.53)", network, got)
				}
				if got := query(t, p.pod, network, ns, true); got != "192.0.2.99" {
					t.Errorf("proxy DNS over %s answered by %s, want upstream (192.0.2.99)", network, got)
				}
			}

			cleanupWith(t, p.pod, &cfg, b)
			dial(t, p.pod, peer)
			expect(t, "outbound after cleanup", server, peer, outbound)
		})
	}
}

func TestExcludedInterface(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t)
			cfg := Injector()
			cfg.ExcludeInterfaces = []string{p.podIf}
			outbound := listen(t, p.pod, ":15001")
			inbound := listen(t, p.pod, ":15006")
			app := listen(t, p.pod, ":9080")
			server := listen(t, p.peer, ":8080")
			applyWith(t, p.pod, &cfg, b)
			peer := netip.AddrPortFrom(p.peerIP, 8080)
			dial(t, p.pod, peer)
			expect(t, "outbound on excluded interface", server, peer, outbound)
			podApp := netip.AddrPortFrom(p.podIP, 9080)
			dial(t, p.peer, podApp)
			expect(t, "inbound on excluded interface", app, podApp, inbound)
		})
	}
}

// TestDualStack: with --dual-stack and an IPv6 address in the pod (after
// its IPv4 one), Run programs both families, and each family keeps its own
// exemptions.
func TestDualStack(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t)
			p.pod.Exec(t, "ip", "addr", "add", "fd77::2/64", "dev", p.podIf, "nodad")
			p.peer.Exec(t, "ip", "addr", "add", "fd77::1/64", "dev", p.peerIf, "nodad")
			podIP6, peerIP6 := netip.MustParseAddr("fd77::2"), netip.MustParseAddr("fd77::1")
			cfg := Injector()
			cfg.DualStack = true // Resolve turns IPv6 on: the pod has an IPv6 address
			outbound := listen(t, p.pod, ":15001")
			inbound := listen(t, p.pod, ":15006")
			server := listen(t, p.peer, ":8080")
			local := listen(t, p.pod, "[::1]:9090")
			applyWith(t, p.pod, &cfg, b)
			resolved := cfg.Policy
			resolved.EnableIPv6 = true
			b.holds(t, p.pod, &resolved)
			for _, peer := range []netip.AddrPort{netip.AddrPortFrom(p.peerIP, 8080), netip.AddrPortFrom(peerIP6, 8080)} {
				dial(t, p.pod, peer)
				expect(t, "app outbound to "+peer.String(), outbound, peer, server)
				dialAsProxy(t, p.pod, peer)
				expect(t, "proxy outbound to "+peer.String(), server, peer, outbound)
			}
			for _, app := range []netip.AddrPort{netip.AddrPortFrom(p.podIP, 9080), netip.AddrPortFrom(podIP6, 9080)} {
				dial(t, p.peer, app)
				expect(t, "inbound to "+app.String(), inbound, app)
			}
			lo6 := netip.MustParseAddrPort("[::1]:9090")
			dial(t, p.pod, lo6)
			expect(t, "IPv6 loopback", local, lo6, outbound)
			cleanupWith(t, p.pod, &cfg, b)
		})
	}
}

// TestIPv6NotFirst: without --dual-stack a pod whose first address is IPv4
// gets IPv4 rules only, as in Istio, though it has an IPv6 address too: its
// IPv6 traffic is not captured.
func TestIPv6NotFirst(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t)
			p.pod.Exec(t, "ip", "addr", "add", "fd77::2/64", "dev", p.podIf, "nodad")
			p.peer.Exec(t, "ip", "addr", "add", "fd77::1/64", "dev", p.peerIf, "nodad")
			cfg := Injector()
			outbound := listen(t, p.pod, ":15001")
			server := listen(t, p.peer, ":8080")
			applyWith(t, p.pod, &cfg, b)
			b.holds(t, p.pod, &cfg.Policy) // IPv4 only
			v4 := netip.AddrPortFrom(p.peerIP, 8080)
			dial(t, p.pod, v4)
			expect(t, "app outbound over IPv4", outbound, v4, server)
			v6 := netip.MustParseAddrPort("[fd77::1]:8080")
			dial(t, p.pod, v6)
			expect(t, "app outbound over IPv6", server, v6, outbound)
			cleanupWith(t, p.pod, &cfg, b)
		})
	}
}

// expectTProxyDelivery listens transparently on 15006 in the pod, dials the
// pod's app port from the peer, and checks that TPROXY delivered it with the
// original destination as the local address, with the policy routing in place.
func expectTProxyDelivery(t *testing.T, p *pod) {
	t.Helper()
	var ln net.Listener
	p.pod.Do(t, func() (err error) {
		lc := net.ListenConfig{Control: transparent}
		ln, err = lc.Listen(context.Background(), "tcp", ":15006")
		return err
	})
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			got <- c.LocalAddr().String()
			c.Close()
		}
	}()
	dial(t, p.peer, netip.AddrPortFrom(p.podIP, 9080))
	select {
	case a := <-got:
		if a != "10.77.0.2:9080" {
			t.Errorf("TPROXY delivered with local address %s, want 10.77.0.2:9080", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("inbound connection not delivered to the TPROXY listener")
	}
	if out := p.pod.Exec(t, "ip", "rule", "show"); !containsAll(out, "fwmark 0x539", "lookup 133") {
		t.Errorf("ip rule missing:\n%s", out)
	}
}

// TestTProxyInbound: TPROXY mode delivers inbound connections to a
// transparent listener with their original destination, and drops them
// rather than let them reach the app while the proxy is not listening.
func TestTProxyInbound(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t)
			cfg := Injector()
			cfg.InboundMode = TProxy
			applyWith(t, p.pod, &cfg, b)
			app := listen(t, p.pod, ":9080")
			p.peer.Do(t, func() error {
				c, err := net.DialTimeout("tcp", netip.AddrPortFrom(p.podIP, 9080).String(), 300*time.Millisecond)
				if err == nil {
					c.Close()
					return errors.New("connection to the app succeeded with no proxy listening")
				}
				return nil
			})
			select {
			case got := <-app.conn:
				t.Errorf("app accepted %s past TPROXY with no proxy listening", got)
			default:
			}

			expectTProxyDelivery(t, p)
			cleanupWith(t, p.pod, &cfg, b)
			if out := p.pod.Exec(t, "ip", "route", "show", "table", "133"); out != "" {
				t.Errorf("route table 133 not emptied:\n%s", out)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// transparent sets IP_TRANSPARENT, which a TPROXY listener needs.
func transparent(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1) })
	return errors.Join(err, serr)
}
