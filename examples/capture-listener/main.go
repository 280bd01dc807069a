// Command capture-listener stands in for the sidecar proxy in the demo: it
// listens on the capture ports and prints, for each connection the rules send
// it, the destination the app really dialled (SO_ORIGINAL_DST); on the DNS
// port it answers every A query with a fixed address and prints the question.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/origdst"
)

func main() {
	tcpPorts := flag.String("tcp", "15001,15006", "comma list of TCP capture ports")
	dnsAddr := flag.String("dns", "127.0.0.1:15053", "DNS listen address (UDP and TCP)")
	answer := flag.String("answer", "10.99.0.100", "address every A query is answered with")
	flag.Parse()
	out := log.New(os.Stdout, "", 0)
	for _, p := range strings.Split(*tcpPorts, ",") {
		ln, err := net.Listen("tcp", ":"+p)
		if err != nil {
			log.Fatal(err)
		}
		go serveTCP(out, ln.(*net.TCPListener), p)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeA {
			rr, err := dns.NewRR(fmt.Sprintf("%s 30 IN A %s", r.Question[0].Name, *answer))
			if err == nil {
				m.Answer = append(m.Answer, rr)
			}
		}
		out.Printf("  [proxy :15053] DNS %s query for %s captured, answered %s", w.RemoteAddr().Network(), r.Question[0].Name, *answer)
		_ = w.WriteMsg(m)
	})
	for _, network := range []string{"udp", "tcp"} {
		srv := &dns.Server{Addr: *dnsAddr, Net: network, Handler: h}
		go func() { log.Fatal(srv.ListenAndServe()) }()
	}
	out.Printf("  [proxy] listening on TCP %s and DNS %s as uid %d", *tcpPorts, *dnsAddr, os.Getuid())
	select {}
}

func serveTCP(out *log.Logger, ln *net.TCPListener, port string) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		dst, err := origdst.Of(c)
		if err != nil {
			out.Printf("  [proxy :%s] connection from %s: %v", port, c.RemoteAddr(), err)
		} else {
			out.Printf("  [proxy :%s] captured connection from %s, original destination %s", port, c.RemoteAddr(), dst)
		}
		c.Close()
	}
}
