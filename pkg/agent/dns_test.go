package agent

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/agent/dnsproxy"
)

// TestDNSConfigFromTheAgentsConfig: the DNS proxy gets its addresses and
// DNS_FORWARD_PARALLEL and DNS_FORWARD_TIMEOUT from the agent's parsed configuration, and its
// upstreams from resolv.conf.
func TestDNSConfigFromTheAgentsConfig(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 10.96.0.10\nsearch bookinfo.svc.cluster.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want dnsproxy.Config
	}{
		{
			name: "defaults",
			want: dnsproxy.Config{Addrs: dnsproxy.DefaultAddrs()},
		},
		{
			name: "address and parallel forwarding",
			env:  []string{"DNS_PROXY_ADDR=127.0.0.1:5353", "DNS_FORWARD_PARALLEL=true"},
			want: dnsproxy.Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5353")}, ForwardParallel: true},
		},
		{
			name: "forward timeout below the proxy's budget",
			env:  []string{"DNS_FORWARD_TIMEOUT=2s"},
			want: dnsproxy.Config{Addrs: dnsproxy.DefaultAddrs(), AttemptTimeout: 2 * time.Second, Timeout: dnsproxy.DefaultTimeout},
		},
		{
			name: "forward timeout above it",
			env:  []string{"DNS_FORWARD_TIMEOUT=10s"},
			want: dnsproxy.Config{Addrs: dnsproxy.DefaultAddrs(), AttemptTimeout: 10 * time.Second, Timeout: 10 * time.Second},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(append([]string{"POD_NAMESPACE=bookinfo"}, tc.env...), "sidecar")
			if err != nil {
				t.Fatal(err)
			}
			got, err := dnsConfig(cfg, resolv)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Namespace = "bookinfo"
			want.Upstreams = []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:53")}
			want.SearchDomains = []string{"bookinfo.svc.cluster.local"}
			if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
				t.Errorf("DNS proxy config (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := dnsConfig(&config.Config{}, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing resolv.conf: no error")
	}
}
