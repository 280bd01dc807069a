package dnsproxy

import (
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestCompactAnswersAlike: every question the built table answers gets
// the same answer after compact, which shares what it can.
func TestCompactAnswersAlike(t *testing.T) {
	nt := testTable()
	ports := map[string][]ServicePort{
		"reviews.default.svc.cluster.local": {{Name: "http", Port: 9080}, {Name: "grpc", Port: 9090}},
		"api.example.com":                   {{Port: 443}},
		"db.default.svc.cluster.local":      {{Name: "pg", Port: 5432, Protocol: "TCP"}, {Name: "dns", Port: 53, Protocol: "UDP"}},
	}
	o := tableOptions{namespace: "default", svcDomain: "svc.cluster.local", search: testSearch, ports: newPortIndex(ports)}
	log := slog.New(slog.DiscardHandler)
	loose, tight := assemble(nt, o, log), buildTable(nt, o, log)
	if loose.questions != tight.questions {
		t.Errorf("%d questions after compact, %d before", tight.questions, loose.questions)
	}
	type question struct {
		key    string
		target []byte
	}
	var qs []question
	for name, n := range loose.names {
		for _, ta := range n.types {
			qs = append(qs, question{key: name + string([]byte{byte(ta.qtype >> 8), byte(ta.qtype)})})
		}
		for _, labels := range []string{"", "\x05_http\x04_tcp", "\x05_9090\x04_tcp", "\x04_dns\x04_udp", "\x04_443\x04_tcp"} {
			if a, _ := loose.lookup([]byte(labels + name + "\x00\x21")); a != nil {
				qs = append(qs, question{key: labels + name + "\x00\x21"})
			}
		}
		// The name with the first search domain appended: an alias.
		alias := name[:len(name)-1] + string(loose.search0Wire) + "\x00\x01"
		if a, target := loose.lookup([]byte(alias)); a != nil {
			qs = append(qs, question{key: alias, target: target})
		}
	}
	for _, e := range loose.ptrs {
		rev, err := dns.ReverseAddr(netip.AddrFrom16(e.addr).Unmap().String())
		if err != nil {
			t.Fatal(err)
		}
		key, err := nameKey(rev, dns.TypePTR)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, question{key: key})
	}
	before, after := map[*answer]bool{}, map[*answer]bool{}
	for _, q := range qs {
		la, ltarget := loose.lookup([]byte(q.key))
		ta, ttarget := tight.lookup([]byte(q.key))
		if la == nil || ta == nil || string(ltarget) != string(ttarget) {
			t.Fatalf("%q: answered before compact %v, after %v (targets %q, %q)", q.key, la != nil, ta != nil, ltarget, ttarget)
		}
		if q.key[len(q.key)-1] == byte(dns.TypePTR) && ta.wire[7] == 0 {
			t.Fatalf("%q: answered with no records", q.key)
		}
		before[la], after[ta] = true, true
		// Twice: the rotation goes on alike.
		for range 2 {
			want, got := la.msg(0, q.key, ltarget).String(), ta.msg(0, q.key, ttarget).String()
			if got != want {
				t.Errorf("%q after compact:\n%s\nbefore:\n%s", q.key, got, want)
			}
		}
	}
	if len(qs) < 60 || len(after) >= len(before) {
		t.Errorf("%d questions; %d distinct answers after compact, %d before: want fewer", len(qs), len(after), len(before))
	}
	t.Logf("%d questions; %d distinct answers after compact, %d before", len(qs), len(after), len(before))
}

// TestMoveToCopiesEveryField: moveTo must learn of every new field.
func TestMoveToCopiesEveryField(t *testing.T) {
	if n := reflect.TypeFor[answer]().NumField(); n != 8 {
		t.Fatalf("answer has %d fields; make moveTo copy the new ones, then update this test", n)
	}
	a := &answer{wire: []byte{1}, qEnd: 2, rotOff: 3, rotN: 4, rotSize: 5, anyName: true, age: &aging{stored: 6}}
	a.next.Store(7)
	var b answer
	a.moveTo(&b)
	if got, want := fmt.Sprint(b.wire, b.qEnd, b.rotOff, b.rotN, b.rotSize, b.next.Load(), b.anyName, b.age), fmt.Sprint(a.wire, a.qEnd, a.rotOff, a.rotN, a.rotSize, a.next.Load(), a.anyName, a.age); got != want {
		t.Errorf("moved %s, want %s", got, want)
	}
}

// TestSRVLabels: only two leading underscore labels before a name are an
// SRV service and protocol.
func TestSRVLabels(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
	}{
		{"_http._tcp.reviews.", 11},
		{"_8080._udp.a.b.", 11},
		{"_http._tcp.", 0},        // no name under them
		{"http._tcp.reviews.", 0}, // the first is no service
		{"_http.tcp.reviews.", 0},
		{"_http.", 0},
		{".", 0},
	} {
		key, err := nameKey(tc.name, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := srvLabels([]byte(key[:len(key)-2])); got != tc.want {
			t.Errorf("srvLabels(%q) = %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, b := range [][]byte{nil, {4, '_', 'a'}, {2, '_', 'a', 9, '_'}} {
		if got := srvLabels(b); got != 0 {
			t.Errorf("srvLabels(%q) = %d, want 0", b, got)
		}
	}
	ports := map[string][]ServicePort{"reviews.default.svc.cluster.local": {{Name: "http", Port: 9080}}}
	tb := buildTable(testTable(), tableOptions{namespace: "default", svcDomain: "svc.cluster.local", search: testSearch, ports: newPortIndex(ports)}, slog.New(slog.DiscardHandler))
	for name, want := range map[string]bool{
		"_http._tcp.reviews.default.svc.cluster.local.": true,
		"_9080._tcp.reviews.":                           true,
		"_HTTP._TCP.Reviews.Default.":                   true,
		"reviews.default.":                              true,
		"_grpc._tcp.reviews.default.":                   false,
		"_http._udp.reviews.default.":                   false,
		"_http._tcp.ratings.other.":                     false,
		"_x._y._http._tcp.reviews.default.":             false,
	} {
		key, err := nameKey(name, dns.TypeSRV)
		if err != nil {
			t.Fatal(err)
		}
		if a, _ := tb.lookup([]byte(key)); (a != nil) != want {
			t.Errorf("SRV %s answered: %v, want %v", name, a != nil, want)
		}
	}
}

// TestReverseAddr: only the name dns.ReverseAddr makes of an address is a
// reverse lookup of it.
func TestReverseAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // "" for none
	}{
		{"1.0.0.10.in-addr.arpa.", "10.0.0.1"},
		{"255.255.255.255.IN-ADDR.ARPA.", "255.255.255.255"},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "fd00::1"},
		{"B.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "fd00::b"},
		{"01.0.0.10.in-addr.arpa.", ""},
		{"256.0.0.10.in-addr.arpa.", ""},
		{"-1.0.0.10.in-addr.arpa.", ""},
		{"0.0.10.in-addr.arpa.", ""},
		{"1.1.0.0.10.in-addr.arpa.", ""},
		{"1.0.0.10.in-addr.arpa.com.", ""},
		{"10.in-addr.arpa.", ""},
		{"g.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", ""},
		{"10.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", ""},
		{"0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.ip6.arpa.", ""},
		// ::ffff:10.0.0.1 is IPv4's, asked under in-addr.arpa.
		{"1.0.0.0.0.0.a.0.f.f.f.f." + strings.Repeat("0.", 20) + "ip6.arpa.", ""},
		{"reviews.default.", ""},
		{".", ""},
	} {
		key, err := nameKey(tc.name, 0)
		if err != nil {
			t.Fatal(err)
		}
		ip, ok := reverseAddr([]byte(key[:len(key)-2]))
		if got := map[bool]string{true: ip.String(), false: ""}[ok]; got != tc.want {
			t.Errorf("reverseAddr(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
