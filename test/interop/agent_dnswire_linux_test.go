package interop

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// oddQuery is a query a resolver seldom sends, and what the agent's DNS
// proxy answers it with. Skiff's proxy takes such queries apart itself;
// these expectations are checked against Istio's agent too, so they are
// Istio's behaviour, not our reading of it, except where istio says how
// Istio's agent differs, and why Skiff keeps to the RFC there.
type oddQuery struct {
	name  string
	msg   func(mesh string) *dns.Msg
	rcode int
	addr  string // an A record the answer must hold, or ""
	tc    bool   // truncated for the client (then some records, not all)
	istio *oddQuery
}

func oddQueries() []oddQuery {
	q := func(name string, qtype uint16, edit func(*dns.Msg)) func(string) *dns.Msg {
		return func(mesh string) *dns.Msg {
			if name == "" {
				name = mesh
			}
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(name), qtype)
			if edit != nil {
				edit(m)
			}
			return m
		}
	}
	return []oddQuery{
		{name: "mesh name in mixed case", msg: q("", dns.TypeA, func(m *dns.Msg) {
			m.Question[0].Name = "REVIEWS." + m.Question[0].Name[len("reviews."):]
		}), rcode: dns.RcodeSuccess, addr: "10.0.0.50"},
		{name: "mesh name with EDNS0 options", msg: q("", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(1232, true)
			opt := m.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID}, &dns.EDNS0_EXPIRE{Code: dns.EDNS0EXPIRE})
		}), rcode: dns.RcodeSuccess, addr: "10.0.0.50"},
		{name: "mesh name with an address record in the additional section", msg: q("", dns.TypeA, func(m *dns.Msg) {
			m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "extra.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
				A: net.IPv4(192, 0, 2, 1)})
		}), rcode: dns.RcodeSuccess, addr: "10.0.0.50"},
		{name: "two questions", msg: q("", dns.TypeA, func(m *dns.Msg) {
			m.Question = append(m.Question, dns.Question{Name: "other.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
		}), rcode: dns.RcodeFormatError},
		// Istio's agent looks up the question of any opcode and forwards
		// it (the upstream here answers NXDOMAIN); a proxy that answers
		// only queries says NOTIMP (RFC 1035 4.1.1).
		{name: "NOTIFY", msg: q("", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), rcode: dns.RcodeNotImplemented,
			istio: &oddQuery{rcode: dns.RcodeNameError}},
		// Istio's agent ignores the EDNS version and answers without OPT;
		// RFC 6891 6.1.3 asks for BADVERS.
		{name: "EDNS version 1", msg: q("", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().SetVersion(1)
		}), rcode: dns.RcodeBadVers, istio: &oddQuery{rcode: dns.RcodeSuccess, addr: "10.0.0.50"}},
		{name: "class CHAOS, forwarded", msg: q("version.bind.", dns.TypeTXT, func(m *dns.Msg) {
			m.Question[0].Qclass = dns.ClassCHAOS
		}), rcode: dns.RcodeNameError},
		// 2 kB of TXT records for a client of 512 bytes: Istio's agent
		// forwards the query as it is and passes on the upstream's own
		// cut; Skiff's asks with EDNS0, then over TCP, and cuts the whole
		// answer itself. Either way the client gets TC and what fits
		// once compressed: this upstream, a miekg/dns server, does not
		// compress, and both cuts keep as many records as miekg/dns's
		// Truncate does.
		{name: "an upstream answer too big for the client", msg: q(bigName, dns.TypeTXT, nil), rcode: dns.RcodeSuccess, tc: true},
	}
}

// dnsWire asks the pod's DNS proxy every odd query and checks each answer,
// as Istio's agent gives it when istio is set.
func dnsWire(t *testing.T, p *pod, istio bool) {
	mesh := "reviews." + p.namespace + ".svc.cluster.local."
	for _, oq := range oddQueries() {
		t.Run(oq.name, func(t *testing.T) {
			req := oq.msg(mesh)
			if istio && oq.istio != nil {
				oq.rcode, oq.addr = oq.istio.rcode, oq.istio.addr
			}
			var resp *dns.Msg
			var err error
			p.ns.Do(t, func() error {
				c := &dns.Client{Timeout: 2 * time.Second}
				resp, _, err = c.Exchange(req, "127.0.0.1:15053")
				return nil
			})
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if resp.Id != req.Id || resp.Opcode != req.Opcode || resp.Rcode != oq.rcode {
				t.Fatalf("id %d opcode %s rcode %s, want %d %s %s\n%v", resp.Id, dns.OpcodeToString[resp.Opcode],
					dns.RcodeToString[resp.Rcode], req.Id, dns.OpcodeToString[req.Opcode], dns.RcodeToString[oq.rcode], resp)
			}
			if oq.tc {
				all := len(bigAnswer(bigName))
				cut := new(dns.Msg)
				cut.SetQuestion(bigName, dns.TypeTXT)
				cut.Answer = bigAnswer(bigName)
				cut.Truncate(dns.MinMsgSize)
				if !resp.Truncated || len(resp.Answer) < len(cut.Answer) || len(resp.Answer) >= all {
					t.Fatalf("tc %v with %d of %d records, want TC and at least the %d miekg/dns's Truncate keeps",
						resp.Truncated, len(resp.Answer), all, len(cut.Answer))
				}
				t.Logf("TC with %d of %d records", len(resp.Answer), all)
			}
			if !oq.tc && resp.Truncated {
				t.Fatalf("TC set\n%v", resp)
			}
			if oq.addr == "" {
				return
			}
			for _, rr := range resp.Answer {
				if a, ok := rr.(*dns.A); ok && a.A.String() == oq.addr {
					return
				}
			}
			t.Fatalf("no A %s in\n%v", oq.addr, resp)
		})
	}
}
