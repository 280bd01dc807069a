package cni

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/google/go-cmp/cmp"
)

// chainResult is what a bridge plugin returns for a dual-stack pod, at ver.
func chainResult(t testing.TB, ver string) []byte {
	t.Helper()
	idx := 1
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: "cni0"}, {Name: "eth0", Sandbox: "/run/netns/p", Mac: "0a:58:0a:58:00:05"}},
		IPs: []*current.IPConfig{
			{Interface: &idx, Address: net.IPNet{IP: net.ParseIP("10.88.0.5").To4(), Mask: net.CIDRMask(16, 32)}, Gateway: net.ParseIP("10.88.0.1")},
			{Interface: &idx, Address: net.IPNet{IP: net.ParseIP("fd00::5"), Mask: net.CIDRMask(64, 128)}},
		},
		Routes: []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: net.ParseIP("10.88.0.1")}},
		DNS:    types.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"svc.cluster.local"}},
	}
	conv, err := r.GetAsVersion(ver)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(conv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func confWithPrev(ver string, prev []byte) []byte {
	return []byte(`{"cniVersion":"` + ver + `","name":"n","type":"istio-cni","prevResult":` + string(prev) + `}`)
}

// libraryOutput is what the plugin printed before prevResult passed
// through: the library's parse of the configuration's prevResult, printed
// at its version.
func libraryOutput(t *testing.T, conf []byte) any {
	t.Helper()
	var c types.PluginConf
	if err := json.Unmarshal(conf, &c); err != nil {
		t.Fatal(err)
	}
	if err := version.ParsePrevResult(&c); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := printTo(&b, c.PrevResult, c.CNIVersion); err != nil {
		t.Fatal(err)
	}
	return generic(t, b.Bytes())
}

func generic(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// TestPrevResultAsTheLibraryPrintsIt: at every spec version the plugin
// prints what the library's parse and print of the prevResult gave, and
// reads the pod's addresses from it.
func TestPrevResultAsTheLibraryPrintsIt(t *testing.T) {
	dual := []netip.Addr{netip.MustParseAddr("10.88.0.5"), netip.MustParseAddr("fd00::5")}
	for _, c := range []struct {
		conf, prev string
		passed     bool // printed as its bytes
		addrs      []netip.Addr
	}{
		{"1.1.0", "1.1.0", true, dual},
		{"1.0.0", "1.0.0", true, dual},
		{"0.4.0", "0.4.0", true, dual},
		{"0.3.1", "0.3.1", true, dual},
		{"0.3.0", "0.3.0", true, dual},
		{"0.2.0", "0.2.0", false, dual},
	} {
		t.Run(c.conf+" from "+c.prev, func(t *testing.T) {
			conf := confWithPrev(c.conf, chainResult(t, c.prev))
			parsed, err := ParseConfig(conf)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := parsed.prev.printTo(&out, parsed.CNIVersion); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(libraryOutput(t, conf), generic(t, out.Bytes())); diff != "" {
				t.Errorf("(-library +ours):\n%s", diff)
			}
			if got := parsed.prev.typed == nil; got != c.passed {
				t.Errorf("passed as bytes: %v, want %v", got, c.passed)
			}
			if diff := cmp.Diff(c.addrs, parsed.prev.addrs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoPrevResultPrintsAnEmptyResult(t *testing.T) {
	parsed, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"n","type":"istio-cni"}`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := parsed.prev.printTo(&out, parsed.CNIVersion); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"cniVersion": "1.0.0"}, generic(t, out.Bytes())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestPrevResultOfAnotherVersion is refused, as the library refuses it.
func TestPrevResultOfAnotherVersion(t *testing.T) {
	for _, c := range [][2]string{{"1.0.0", "0.4.0"}, {"0.4.0", "1.0.0"}, {"0.3.1", "0.3.0"}} {
		conf := confWithPrev(c[0], chainResult(t, c[1]))
		var lib types.PluginConf
		if err := json.Unmarshal(conf, &lib); err != nil {
			t.Fatal(err)
		}
		libErr := version.ParsePrevResult(&lib)
		_, err := ParseConfig(conf)
		if (err == nil) != (libErr == nil) {
			t.Errorf("%s from %s: got %v, the library %v", c[0], c[1], err, libErr)
		}
	}
}

func TestBadPrevResult(t *testing.T) {
	for prev, want := range map[string]string{
		`[]`: "cannot unmarshal array",
		`5`:  "cannot unmarshal number",
		`{"cniVersion":"1.0.0","ips":[{"address":"nope"}]}`:        `ips: address "nope"`,
		`{"cniVersion":"1.0.0","ips":[{"address":7}]}`:             "cannot unmarshal number",
		`{"cniVersion":"0.4.0","ips":[{"address":"10.0.0.1/33"}]}`: "invalid CIDR address",
	} {
		_, err := ParseConfig(confWithPrev("1.0.0", []byte(prev)))
		if err == nil || !strings.Contains(err.Error(), "bad prevResult") || !strings.Contains(err.Error(), want) {
			t.Errorf("prevResult %s: got %v, want bad prevResult with %q", prev, err, want)
		}
	}
}

// FuzzPrevResult: whatever prevResult the library accepts, the plugin
// accepts too, with the same pod addresses.
func FuzzPrevResult(f *testing.F) {
	for _, v := range []string{"1.0.0", "0.4.0", "0.3.1", "0.2.0"} {
		f.Add(v, string(chainResult(f, v)))
	}
	f.Add("1.0.0", `null`)
	f.Add("1.0.0", `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.1/024"}]}`)
	f.Fuzz(func(t *testing.T, ver, prev string) {
		conf := confWithPrev(ver, []byte(prev))
		var lib types.PluginConf
		if json.Unmarshal(conf, &lib) != nil || version.ParsePrevResult(&lib) != nil {
			return
		}
		parsed, err := ParseConfig(conf)
		if err != nil {
			if strings.Contains(err.Error(), "bad prevResult") {
				t.Fatalf("the library accepts %s at %s, the plugin says %v", prev, ver, err)
			}
			return // refused for another key, as before
		}
		var want []netip.Addr
		if lib.PrevResult != nil {
			res, err := current.NewResultFromResult(lib.PrevResult)
			if err != nil {
				return
			}
			for _, ip := range res.IPs {
				if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
					want = append(want, a.Unmap())
				}
			}
		}
		var got []netip.Addr
		if parsed.prev != nil {
			got = parsed.prev.addrs
		}
		if !slices.Equal(want, got) {
			t.Errorf("%s at %s: addresses %v, the library %v", prev, ver, got, want)
		}
	})
}
