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

// forwardZone is the zone the upstream answers: names the agent forwards.
const forwardZone = "fwd.agentbench.test."

// startUpstream runs a DNS server on the lab's gateway port 53 inside the
// node namespace, the pods' resolv.conf nameserver: it answers every A
// question with TTL 0 (nothing can be cached) and others with no data.
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
			m.Answer = []dns.RR{&dns.A{
				Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
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

// dnsLoad runs dnsperf in the pod for d, as an app would query (root, so
// the queries are captured to the agent): every mesh name, answered from
// the NameTable, and as many forwarded names, answered by the upstream.
// It returns dnsperf's summary lines.
func dnsLoad(l *lab.Lab, pod *lab.NS, services int, d time.Duration) (string, error) {
	var b strings.Builder
	n := max(services, 100)
	for i := range n {
		if i < services {
			fmt.Fprintf(&b, "%s. A\n", svcHost(i))
		}
		fmt.Fprintf(&b, "name-%04d.%s A\n", i, forwardZone)
	}
	path := filepath.Join(l.Dir, "agentbench-queries.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
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
