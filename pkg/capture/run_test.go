package capture

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/iptables/iptablestest"
	"github.com/skiff-mesh/skiff/pkg/nftables"
)

// The tests in this file run Run's orchestration without root: every
// iptables flavour is an iptablestest.Fake, and the host, native nftables
// and routing are fakes that write what they are asked to do to one log.

// fakeHost is a namespace with given facts.
type fakeHost struct {
	legacy     bool // legacy tables exist (both families)
	nftInUse   bool // nf_tables holds tables
	ipv6       bool
	dns4, dns6 []netip.Addr
	log        *[]string
}

func (h *fakeHost) LegacyTables(ipt.Family) bool  { return h.legacy }
func (h *fakeHost) Installed(ipt.Mode) bool       { return true }
func (h *fakeHost) NFTablesInUse(ipt.Family) bool { return h.nftInUse }
func (h *fakeHost) InterfaceAddrs() ([]netip.Addr, error) {
	if h.ipv6 {
		return []netip.Addr{netip.MustParseAddr("fd00::2"), netip.MustParseAddr("10.0.0.2")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("10.0.0.2")}, nil
}
func (h *fakeHost) Nameservers() (v4, v6 []netip.Addr, err error) {
	*h.log = append(*h.log, "read resolv.conf")
	return h.dns4, h.dns6, nil
}

// fakeNFTables holds our inet tables by name.
type fakeNFTables struct {
	tables []string
	log    *[]string
}

func (k *fakeNFTables) Apply(p *nftables.Program, force bool) (nftables.Result, error) {
	*k.log = append(*k.log, fmt.Sprintf("nftables apply %d tables, force %t", len(p.Tables), force))
	k.tables = nil
	for _, t := range p.Tables {
		k.tables = append(k.tables, t.Name)
	}
	return nftables.Result{Changed: true}, nil
}

func (k *fakeNFTables) InSync(p *nftables.Program) (bool, error) {
	return len(k.tables) == len(p.Tables), nil
}

func (k *fakeNFTables) Present() ([]string, error) { return k.tables, nil }

func (k *fakeNFTables) Cleanup() ([]string, error) {
	*k.log = append(*k.log, "nftables delete "+strings.Join(k.tables, ","))
	removed := k.tables
	k.tables = nil
	return removed, nil
}

type fakeRouting struct{ log *[]string }

func (r fakeRouting) Setup(p *Policy) error {
	*r.log = append(*r.log, fmt.Sprintf("routing setup %s ipv6 %t", p.InboundMode, p.EnableIPv6))
	return nil
}

func (r fakeRouting) Remove(*Policy) error {
	*r.log = append(*r.log, "routing remove")
	return nil
}

// loggedRunner is a fake iptables flavour that also writes each
// transaction to the shared log.
type loggedRunner struct {
	*iptablestest.Fake
	mode ipt.Mode
	log  *[]string
}

func (r loggedRunner) Restore(ctx context.Context, f ipt.Family, text string) error {
	*r.log = append(*r.log, fmt.Sprintf("iptables-%s-restore %s", r.mode, f))
	return r.Fake.Restore(ctx, f, text)
}

// fakeNode is everything Run touches, faked.
type fakeNode struct {
	host    *fakeHost
	nft     *fakeNFTables
	runners map[ipt.Mode]*iptablestest.Fake
	log     []string
	out     strings.Builder
}

func newFakeNode() *fakeNode {
	n := &fakeNode{runners: map[ipt.Mode]*iptablestest.Fake{}}
	n.host = &fakeHost{log: &n.log}
	n.nft = &fakeNFTables{log: &n.log}
	for _, m := range []ipt.Mode{ipt.Legacy, ipt.NFT, ipt.Plain} {
		n.runners[m] = &iptablestest.Fake{}
	}
	return n
}

func (n *fakeNode) env() Env {
	return Env{
		Runner:   func(m ipt.Mode) ipt.Runner { return loggedRunner{n.runners[m], m, &n.log} },
		Host:     n.host,
		NFTables: n.nft,
		Routing:  fakeRouting{&n.log},
		Out:      &n.out,
	}
}

// run runs cfg and returns the log it wrote, emptying it.
func (n *fakeNode) run(t *testing.T, cfg Config) []string {
	t.Helper()
	if err := Run(context.Background(), &cfg, slog.New(slog.DiscardHandler), n.env()); err != nil {
		t.Fatal(err)
	}
	got := n.log
	n.log = nil
	return got
}

// holds fails unless the flavour holds exactly p's rules, resolved on the host.
func (n *fakeNode) holds(t *testing.T, m ipt.Mode, p *Policy) {
	t.Helper()
	h := *n.host
	h.log = new([]string) // not something Run did
	resolved, err := Resolve(*p, &h)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range Build(&resolved) {
		if d := ipt.Drift(rs, n.state(t, m, rs.Family), Ownership()); len(d) > 0 {
			t.Errorf("%s %s:\n%s", m, rs.Family, strings.Join(d, "\n"))
		}
	}
}

// empty fails if the flavour holds any chain or rule of ours.
func (n *fakeNode) empty(t *testing.T, m ipt.Mode) {
	t.Helper()
	for _, f := range []ipt.Family{ipt.IPv4, ipt.IPv6} {
		if text := ipt.Plan(&ipt.Ruleset{Family: f}, n.state(t, m, f), Ownership()); text != "" {
			t.Errorf("%s %s holds rules of ours:\n%s", m, f, n.runners[m].Saved[f])
		}
	}
}

func (n *fakeNode) state(t *testing.T, m ipt.Mode, f ipt.Family) *ipt.State {
	t.Helper()
	st, err := ipt.ParseSave(n.runners[m].Saved[f])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRunAppliesThenReplacesNativeNFTablesThenRoutes(t *testing.T) {
	n := newFakeNode()
	n.nft.tables = []string{nftables.TableNAT} // an earlier --native-nftables run
	n.host.nftInUse = true
	cfg := Injector()
	cfg.Backend = ipt.NFT
	want := []string{"iptables-nft-restore ipv4", "nftables delete istio-proxy-nat", "routing setup REDIRECT ipv6 false"}
	if diff := cmp.Diff(want, n.run(t, cfg)); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	n.holds(t, ipt.NFT, &cfg.Policy)
	// A rerun writes no rules; routing is idempotent and set up again.
	if diff := cmp.Diff([]string{"routing setup REDIRECT ipv6 false"}, n.run(t, cfg)); diff != "" {
		t.Errorf("rerun (-want +got):\n%s", diff)
	}
	// --force-apply rewrites them.
	force := cfg
	force.ForceApply = true
	if got := n.run(t, force); !slices.Contains(got, "iptables-nft-restore ipv4") {
		t.Errorf("--force-apply wrote no rules: %q", got)
	}
	n.holds(t, ipt.NFT, &cfg.Policy)
}

func TestRunSkipsSaveInNewNamespace(t *testing.T) {
	n := newFakeNode()
	cfg := Injector()
	cfg.Backend = ipt.NFT
	n.run(t, cfg)
	if saves := n.runners[ipt.NFT].Saves; len(saves) != 0 {
		t.Errorf("iptables-save ran %d times in a namespace without tables", len(saves))
	}
	n.host.nftInUse = true
	n.run(t, cfg)
	if saves := n.runners[ipt.NFT].Saves; len(saves) != 1 {
		t.Errorf("iptables-save ran %d times, want once", len(saves))
	}
}

func TestRunDryRunChangesNothing(t *testing.T) {
	n := newFakeNode()
	n.host.nftInUse = true
	cfg := Injector()
	cfg.DryRun = true
	if got := n.run(t, cfg); len(got) != 0 {
		t.Errorf("dry run changed the namespace: %q", got)
	}
	want := "# ipv4, iptables nft: iptables-restore --noflush input\n" + ipt.Plan(Build(&cfg.Policy)[0], &ipt.State{}, Ownership())
	if diff := cmp.Diff(want, n.out.String()); diff != "" {
		t.Errorf("dry run printed (-want +got):\n%s", diff)
	}

	// Once applied, the dry run has nothing to print, unless forced.
	apply := cfg
	apply.DryRun = false
	n.run(t, apply)
	n.out.Reset()
	n.run(t, cfg)
	if want := "# ipv4, iptables nft: up to date, nothing to apply\n"; n.out.String() != want {
		t.Errorf("dry run after apply printed %q, want %q", n.out.String(), want)
	}
	n.out.Reset()
	force := cfg
	force.ForceApply = true
	if got := n.run(t, force); len(got) != 0 {
		t.Errorf("forced dry run changed the namespace: %q", got)
	}
	if !strings.Contains(n.out.String(), "-A ISTIO_OUTPUT -j ISTIO_REDIRECT") {
		t.Errorf("forced dry run printed no rules:\n%s", n.out.String())
	}
}

// TestCleanupOrder: cleanup empties the detected flavour, then reads the
// legacy tables beside it (an empty legacy nat table is what Istio's
// detection leaves), then deletes native nftables tables, then routing.
func TestCleanupOrder(t *testing.T) {
	n := newFakeNode()
	cfg := Injector()
	cfg.RedirectDNS = true
	n.host.dns4 = []netip.Addr{netip.MustParseAddr("10.96.0.10")}
	n.host.nftInUse = true
	n.runners[ipt.Legacy].Saved = map[ipt.Family]string{ipt.IPv4: "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"}
	n.host.legacy = true
	n.run(t, cfg)
	n.holds(t, ipt.NFT, &cfg.Policy)
	n.nft.tables = []string{nftables.TableNAT, nftables.TableRaw}

	dry := cfg
	dry.CleanupOnly, dry.DryRun = true, true
	if got := n.run(t, dry); len(got) != 0 {
		t.Errorf("cleanup dry run changed the namespace: %q", got)
	}
	for _, want := range []string{"# ipv4, iptables nft, cleanup: iptables-restore --noflush input\n", "-X ISTIO_OUTPUT_DNS\n", "# ipv4, iptables legacy, cleanup: up to date, nothing to apply\n"} {
		if !strings.Contains(n.out.String(), want) {
			t.Errorf("cleanup dry run lacks %q:\n%s", want, n.out.String())
		}
	}

	clean := cfg
	clean.CleanupOnly = true
	n.runners[ipt.Legacy].Saves = nil
	want := []string{"iptables-nft-restore ipv4", "nftables delete istio-proxy-nat,istio-proxy-raw", "routing remove"}
	if diff := cmp.Diff(want, n.run(t, clean)); diff != "" {
		t.Errorf("cleanup (-want +got):\n%s", diff)
	}
	n.empty(t, ipt.NFT)
	// Detection read legacy IPv4 (it has tables); cleanup read both families.
	if diff := cmp.Diff([]ipt.Family{ipt.IPv4, ipt.IPv6, ipt.IPv4, ipt.IPv6}, n.runners[ipt.Legacy].Saves); diff != "" {
		t.Errorf("legacy reads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"routing remove"}, n.run(t, clean)); diff != "" {
		t.Errorf("second cleanup (-want +got):\n%s", diff)
	}
}

// TestCleanupForcedBackend: with --force-iptables-binary only that flavour is read.
func TestCleanupForcedBackend(t *testing.T) {
	n := newFakeNode()
	n.host.legacy = true
	cfg := Injector()
	cfg.Backend, cfg.CleanupOnly = ipt.NFT, true
	n.run(t, cfg)
	if saves := n.runners[ipt.Legacy].Saves; len(saves) != 0 {
		t.Errorf("legacy read %d times with the nft binary forced", len(saves))
	}
}

// TestRunNativeNFTables: the native backend is chosen once; no iptables
// binary runs, in apply, dry run or cleanup.
func TestRunNativeNFTables(t *testing.T) {
	n := newFakeNode()
	n.host.ipv6 = true
	cfg := Injector()
	cfg.NativeNFTables, cfg.InboundMode = true, TProxy
	want := []string{"nftables apply 2 tables, force false", "routing setup TPROXY ipv6 true"}
	if diff := cmp.Diff(want, n.run(t, cfg)); diff != "" {
		t.Errorf("apply (-want +got):\n%s", diff)
	}
	dry := cfg
	dry.DryRun = true
	n.run(t, dry)
	if !strings.HasPrefix(n.out.String(), "# nftables inet: up to date, nothing to apply\n") {
		t.Errorf("dry run printed:\n%s", n.out.String())
	}
	clean := cfg
	clean.CleanupOnly = true
	want = []string{"nftables delete istio-proxy-nat,istio-proxy-mangle", "routing remove"}
	if diff := cmp.Diff(want, n.run(t, clean)); diff != "" {
		t.Errorf("cleanup (-want +got):\n%s", diff)
	}
	for m, f := range n.runners {
		if len(f.Saves)+len(f.Restored) > 0 {
			t.Errorf("iptables %q ran with --native-nftables", m)
		}
	}
}

// TestCheckUsesEnv: Check reads through the Env's runner and changes nothing.
func TestCheckUsesEnv(t *testing.T) {
	n := newFakeNode()
	n.host.nftInUse = true
	cfg := Injector()
	cfg.Backend = ipt.NFT
	n.run(t, cfg)
	check := func() []string {
		t.Helper()
		drift, err := n.env().Check(context.Background(), &cfg)
		if err != nil {
			t.Fatal(err)
		}
		return drift
	}
	if d := check(); len(d) != 0 {
		t.Errorf("drift right after apply: %q", d)
	}
	f := n.runners[ipt.NFT]
	f.Saved[ipt.IPv4] = strings.Replace(f.Saved[ipt.IPv4], "-A ISTIO_OUTPUT -j ISTIO_REDIRECT\n", "", 1)
	if d := check(); !slices.Contains(d, "ipv4 nat: missing -A ISTIO_OUTPUT -j ISTIO_REDIRECT") {
		t.Errorf("drift after deleting a rule: %q", d)
	}
	if len(n.log) != 0 {
		t.Errorf("check changed the namespace: %q", n.log)
	}
}

// TestResolve: host facts make a new policy; the caller's is unchanged.
func TestResolve(t *testing.T) {
	var log []string
	h := &fakeHost{ipv6: true, dns4: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, log: &log}
	p := Injector().Policy
	p.RedirectDNS = true
	got, err := Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	if !got.EnableIPv6 || len(got.DNSServersV4) != 1 {
		t.Errorf("resolved: ipv6 %t, dns %v", got.EnableIPv6, got.DNSServersV4)
	}
	if p.EnableIPv6 || p.DNSServersV4 != nil {
		t.Error("Resolve changed its argument")
	}
	for _, q := range []Policy{got, func() Policy { c := p; c.CaptureAllDNS = true; return c }()} {
		log = nil
		if _, err := Resolve(q, h); err != nil || len(log) != 0 {
			t.Errorf("resolv.conf read (%v) for a policy that needs no nameservers", err)
		}
	}
}
