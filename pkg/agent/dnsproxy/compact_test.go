package dnsproxy

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// testPorts are service ports for testTable's hosts.
var testPorts = map[string][]ServicePort{
	"reviews.default.svc.cluster.local": {{Name: "http", Port: 9080}, {Name: "grpc", Port: 9090}},
	"api.example.com":                   {{Port: 443}},
	"db.default.svc.cluster.local":      {{Name: "pg", Port: 5432, Protocol: "TCP"}, {Name: "dns", Port: 53, Protocol: "UDP"}},
	"ratings.other.svc.cluster.local":   {{Name: "http", Port: 9080}},
}

// questionKeys are lookup keys for every name of nt's hosts (their own,
// alt_hosts and Kubernetes short forms, and every run of their leading
// labels, each also with the first search domain appended) and type, SRV
// with port labels, and PTR of every address.
func questionKeys(t *testing.T, nt *nds.NameTable, o tableOptions) []string {
	var names []string
	for h, ni := range nt.Table {
		names = append(names, canonicalName(h))
		names = append(names, altHosts(canonicalName(h), ni, o)...)
		// Every run of leading labels, which may or may not be a name.
		labels := dns.SplitDomainName(canonicalName(h))
		for i := range labels {
			names = append(names, strings.Join(labels[:i+1], ".")+".")
		}
		for _, ip := range ni.Ips {
			if rev, err := dns.ReverseAddr(ip); err == nil {
				names = append(names, rev)
			}
		}
	}
	var keys []string
	for _, name := range slices.Sorted(slices.Values(names)) {
		for _, prefix := range []string{"", "_http._tcp.", "_9090._tcp.", "_dns._udp.", "_443._tcp.", "_pg._udp."} {
			for _, q := range []struct {
				name  string
				qtype uint16
			}{
				{prefix + name, dns.TypeA}, {prefix + name, dns.TypeAAAA}, {prefix + name, dns.TypeSRV}, {prefix + name, dns.TypePTR},
				{prefix + name + o.search[0] + ".", dns.TypeA}, {prefix + name + o.search[0] + ".", dns.TypeAAAA},
			} {
				key, err := nameKey(q.name, q.qtype)
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// sameAnswers checks that tables a and b answer every key alike, each key
// twice (the rotation goes on alike), and returns the distinct answers of
// each.
func sameAnswers(t *testing.T, a, b *table, keys []string) (answered int, aAnswers, bAnswers map[*answer]bool) {
	t.Helper()
	aAnswers, bAnswers = map[*answer]bool{}, map[*answer]bool{}
	for _, key := range keys {
		for range 2 {
			aa, atarget := a.lookup([]byte(key))
			ba, btarget := b.lookup([]byte(key))
			if (aa == nil) != (ba == nil) || string(atarget) != string(btarget) {
				t.Fatalf("%q: answered %v and %v (targets %q, %q)", key, aa != nil, ba != nil, atarget, btarget)
			}
			if aa == nil {
				break
			}
			aAnswers[aa], bAnswers[ba] = true, true
			if want, got := answerMsg(t, aa, 0, key, atarget).String(), answerMsg(t, ba, 0, key, btarget).String(); got != want {
				t.Errorf("%q answered\n%s\nand\n%s", key, got, want)
			}
		}
		if aa, _ := a.lookup([]byte(key)); aa != nil {
			answered++
		}
	}
	return answered, aAnswers, bAnswers
}

// TestCompactAnswersAlike: every question the built table answers gets
// the same answer after compact, which shares what it can.
func TestCompactAnswersAlike(t *testing.T) {
	nt := testTable()
	o := tableOptions{namespace: "default", svcDomain: "svc.cluster.local", search: testSearch, ports: newPortIndex(testPorts)}
	log := slog.New(slog.DiscardHandler)
	loose, tight := assemble(nt, o, log), buildTable(nt, o, log)
	if loose.questions != tight.questions {
		t.Errorf("%d questions after compact, %d before", tight.questions, loose.questions)
	}
	answered, before, after := sameAnswers(t, loose, tight, questionKeys(t, nt, o))
	if answered < 150 || len(after) >= len(before) {
		t.Errorf("%d questions answered; %d distinct answers after compact, %d before: want fewer", answered, len(after), len(before))
	}
	t.Logf("%d questions answered; %d distinct answers after compact, %d before", answered, len(after), len(before))
}

// TestDeriveAnswersAsStored: the Kubernetes short forms answered when
// asked are answered as they were when stored, conflicts included.
func TestDeriveAnswersAsStored(t *testing.T) {
	k8s := func(short, ns string, ips ...string) *nds.NameTable_NameInfo {
		return &nds.NameTable_NameInfo{Ips: ips, Registry: "Kubernetes", Shortname: short, Namespace: ns}
	}
	conflicts := testTable()
	for h, ni := range map[string]*nds.NameTable_NameInfo{
		// db-0.db. is the headless pod's short form (same namespace) and
		// service db-0's in namespace db: the first in name order wins.
		"db-0.db.svc.cluster.local": k8s("db-0", "db", "10.7.0.1"),
		// An alt_hosts entry before the service in name order takes its
		// short form; one after it does not.
		"aaa.example.com": {Ips: []string{"10.7.0.2"}, AltHosts: []string{"ratings.other."}},
		"zzz.example.com": {Ips: []string{"10.7.0.3"}, AltHosts: []string{"reviews.default.svc."}},
		// A short name that does not make the host's name: its forms are
		// stored.
		"odd.default.svc.cluster.local": k8s("even", "default", "10.7.0.4"),
		// A host's own name that is another's short form.
		"productpage.default": {Ips: []string{"10.7.0.5"}},
		// Without IPv4 or IPv6, a service still derives.
		"v6svc.default.svc.cluster.local": k8s("v6svc", "default", "fd00::7"),
		"Upper.Default.svc.cluster.local": k8s("Upper", "Default", "10.7.0.6"),
		// A namespace of two labels: a.b. is no short form in namespace c.
		"a.b.c.svc.cluster.local": k8s("a", "b.c", "10.7.0.8"),
	} {
		conflicts.Table[h] = ni
	}
	log := slog.New(slog.DiscardHandler)
	for _, o := range []tableOptions{
		{namespace: "default", svcDomain: "svc.cluster.local", search: testSearch, ports: newPortIndex(testPorts)},
		{namespace: "db", svcDomain: "svc.cluster.local", search: []string{"db.svc.cluster.local"}},
		{namespace: "c", svcDomain: "svc.cluster.local", search: []string{"c.svc.cluster.local"}},
		{namespace: "default", svcDomain: "svc.corp.example", search: testSearch},
		{namespace: "default", search: testSearch},
	} {
		stored := o
		stored.storeDerived = true
		got, want := buildTable(conflicts, o, log), buildTable(conflicts, stored, log)
		answered, _, _ := sameAnswers(t, got, want, questionKeys(t, conflicts, o))
		if answered < 60 {
			t.Errorf("%+v: %d questions answered, want more", o, answered)
		}
		if o.svcDomain == "svc.cluster.local" && len(got.names) >= len(want.names) {
			t.Errorf("%+v: %d names stored, %d when short forms are stored: want fewer", o, len(got.names), len(want.names))
		}
	}
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
