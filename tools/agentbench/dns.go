package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/test/e2e/lab"
)

// Zones the upstream answers: names the agent forwards. Answers in
// forwardZone have TTL 0, so nothing can be cached (CoreDNS gives cluster
// names 5 s, and external names expire too); those in cachedZone have
// TTL 3600.
const (
	forwardZone = "fwd.agentbench.test."
	cachedZone  = "ttl3600.agentbench.test."
)

// The query sets -dns-sets names.
const (
	setMixed   = "mixed"   // every mesh name and as many names in forwardZone
	setMesh    = "mesh"    // mesh names only, answered from the NameTable
	setForward = "forward" // names in forwardZone only: the forward path
	setCached  = "cached"  // names in cachedZone only: the cache, once warm
)

// startUpstream runs a DNS server on the lab's gateway port 53 inside the
// node namespace, the pods' resolv.conf nameserver: it answers every A
// question, with TTL 3600 in cachedZone and TTL 0 elsewhere, and others
// with no data.
func startUpstream(l *lab.Lab) (stop func(), err error) {
	addr := net.JoinHostPort(l.Gateway.String(), "53")
	var pc net.PacketConn
	var ln net.Listener
	err = netns.Do(l.Node.Path, func() error {
		var err error
		if pc, err = net.ListenPacket("udp", addr); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		if pc != nil {
			pc.Close()
		}
		return nil, fmt.Errorf("upstream DNS on %s in %s: %w", addr, l.Node.Name, err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA {
			ttl := uint32(0)
			if dns.IsSubDomain(cachedZone, q.Question[0].Name) {
				ttl = 3600
			}
			m.Answer = []dns.RR{&dns.A{
				Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
				A:   net.IPv4(192, 0, 2, 1),
			}}
		}
		_ = w.WriteMsg(m)
	})
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: ln, Handler: h}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	return func() { _ = udp.Shutdown(); _ = tcp.Shutdown() }, nil
}

// queries is the dnsperf input of one query set.
func queries(set string, services int) (string, error) {
	var b strings.Builder
	n := max(services, 100)
	for i := range n {
		switch set {
		case setMixed:
			if i < services {
				fmt.Fprintf(&b, "%s. A\n", svcHost(i))
			}
			fmt.Fprintf(&b, "name-%04d.%s A\n", i, forwardZone)
		case setMesh:
			if services == 0 {
				return "", fmt.Errorf("-dns-sets %s needs -services", set)
			}
			fmt.Fprintf(&b, "%s. A\n", svcHost(i%services))
		case setForward:
			fmt.Fprintf(&b, "name-%04d.%s A\n", i, forwardZone)
		case setCached:
			fmt.Fprintf(&b, "name-%04d.%s A\n", i, cachedZone)
		default:
			return "", fmt.Errorf("-dns-sets: unknown set %q (want %s, %s, %s or %s)", set, setMixed, setMesh, setForward, setCached)
		}
	}
	return b.String(), nil
}

// dnsLoad runs dnsperf in the pod for d, as an app would query (root, so
// the queries are captured to the agent), with the queries of set: mesh
// names are answered from the NameTable, forwarded names by the upstream.
// It returns dnsperf's summary lines.
func dnsLoad(l *lab.Lab, pod *lab.NS, set string, services int, d time.Duration) (string, error) {
	q, err := queries(set, services)
	if err != nil {
		return "", err
	}
	path := filepath.Join(l.Dir, "agentbench-queries-"+set+".txt")
	if err := os.WriteFile(path, []byte(q), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := exec.LookPath("dnsperf"); err != nil {
		return "", fmt.Errorf("dnsperf not found (apt-get install -y dnsperf): %w", err)
	}
	out, err := l.Exec(pod, "dnsperf", "-s", l.Gateway.String(), "-p", "53", "-d", path,
		"-l", fmt.Sprint(int(d.Seconds())), "-c", "8", "-q", "100", "-t", "2")
	if err != nil {
		return "", fmt.Errorf("dnsperf: %w", err)
	}
	var sum []string
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		for _, k := range []string{"Queries sent", "Queries completed", "Queries lost", "Response codes", "Queries per second", "Average Latency"} {
			if strings.HasPrefix(t, k) {
				sum = append(sum, t)
			}
		}
	}
	return strings.Join(sum, "\n"), nil
}

// resolves reports whether name gets an A answer from the pod's resolver.
func resolves(m *lab.Mesh, pod, name string) bool {
	out, err := m.Dig(pod, name, false)
	return err == nil && strings.TrimSpace(out) != ""
}
