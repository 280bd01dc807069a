package dnsproxy

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cmpAddr compares netip values with ==.
var cmpAddr = cmpopts.EquateComparable(netip.AddrPort{})

func TestParseResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    ResolvConf
		wantErr string
	}{
		{
			name: "kubernetes pod",
			in: "# generated\nnameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n" +
				"options ndots:5 timeout:2 attempts:3\n",
			want: ResolvConf{
				Nameservers: []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:53")},
				Search:      []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"},
				Ndots:       5, Timeout: 2 * time.Second, Attempts: 3,
			},
		},
		{
			name: "defaults, v6, comments, last search wins",
			in:   "nameserver 10.0.0.1 ; primary\nnameserver fd00::a\ndomain Example.COM.\nsearch a.b c.d\noptions rotate ndots:x\n",
			want: ResolvConf{
				Nameservers: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:53"), netip.MustParseAddrPort("[fd00::a]:53")},
				Search:      []string{"a.b", "c.d"},
				Ndots:       1, Timeout: 5 * time.Second, Attempts: 2,
			},
		},
		{name: "bad nameserver", in: "nameserver kube-dns\n", wantErr: `nameserver "kube-dns"`},
		{name: "nameserver without address", in: "nameserver\n", wantErr: "without address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResolvConf(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpAddr); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigFromResolvConf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte("nameserver 127.0.0.53\nsearch ns1.svc.cluster.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromResolvConf(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Upstreams) != 1 || cfg.SearchDomains[0] != "ns1.svc.cluster.local" {
		t.Errorf("got %+v", cfg)
	}
	if _, err := ConfigFromResolvConf(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	d := Config{}.withDefaults()
	if diff := cmp.Diff(DefaultAddrs(), d.Addrs, cmpAddr); diff != "" || d.Timeout != DefaultTimeout || d.UDPReaders < 1 {
		t.Errorf("defaults: %+v", d)
	}
	for _, bad := range []Config{
		{Timeout: -1},
		{Attempts: -1},
		{UDPReaders: 100},
		{Upstreams: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:0")}},
	} {
		if _, err := New(bad, nil, nil); err == nil {
			t.Errorf("config %+v accepted", bad)
		}
	}
}
