package capture

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// backends are the iptables flavours, for the tests that read rules back
// with iptables-save.
var backends = []ipt.Mode{ipt.Legacy, ipt.NFT}

// testBackend is one way Run programs rules. The scenarios every backend
// must pass (real packets, TPROXY, concurrency) run once per testBackend.
type testBackend struct {
	name string
	// choose sets the options that select the backend.
	choose func(*Options)
	// holds fails unless the namespace holds exactly the rules of p (resolved).
	holds func(t testing.TB, ns *netnstest.NS, p *Policy)
	// residue fails if any rule, chain or table of ours, TPROXY routing or ::6 is left.
	residue func(t testing.TB, ns *netnstest.NS)
}

func iptablesBackend(m ipt.Mode) testBackend {
	return testBackend{
		name:   string(m),
		choose: func(o *Options) { o.Backend = m },
		holds: func(t testing.TB, ns *netnstest.NS, p *Policy) {
			t.Helper()
			for _, rs := range Build(p) {
				if d := ipt.Drift(rs, save(t, ns, m, rs.Family), Ownership()); len(d) > 0 {
					t.Errorf("%s %s:\n%s", m, rs.Family, strings.Join(d, "\n"))
				}
			}
		},
		residue: func(t testing.TB, ns *netnstest.NS) { t.Helper(); assertNoResidue(t, ns, m) },
	}
}

var testBackends = []testBackend{
	iptablesBackend(ipt.Legacy),
	iptablesBackend(ipt.NFT),
	{
		name:   "nftables",
		choose: func(o *Options) { o.NativeNFTables = true },
		holds: func(t testing.TB, ns *netnstest.NS, p *Policy) {
			t.Helper()
			prog, err := nftProgram(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := listOurs(t, ns); got != prog.String() {
				t.Errorf("nft lists (-got +want):\n%s", lineDiff(got, prog.String()))
			}
		},
		residue: assertNoNFTResidue,
	},
}

// runWith runs cfg in ns with the backend b.
func runWith(ns *netnstest.NS, cfg *Config, b testBackend, log *slog.Logger) error {
	c := *cfg
	c.NetworkNamespace = ns.Path
	b.choose(&c.Options)
	return Run(context.Background(), &c, log, Env{Out: io.Discard})
}

// applyWith applies cfg in ns with the backend b.
func applyWith(t testing.TB, ns *netnstest.NS, cfg *Config, b testBackend) {
	t.Helper()
	if err := runWith(ns, cfg, b, testLog(t)); err != nil {
		t.Fatalf("run %s: %v", b.name, err)
	}
}

// cleanupWith removes cfg's rules from ns with the backend b and checks that nothing is left.
func cleanupWith(t testing.TB, ns *netnstest.NS, cfg *Config, b testBackend) {
	t.Helper()
	c := *cfg
	c.CleanupOnly, c.RunValidation = true, false
	applyWith(t, ns, &c, b)
	b.residue(t, ns)
}

// countingRunner is the real Exec runner, counting transactions.
type countingRunner struct {
	ipt.Exec
	mu       sync.Mutex
	restores []string
}

func (c *countingRunner) Restore(ctx context.Context, f ipt.Family, text string) error {
	c.mu.Lock()
	c.restores = append(c.restores, text)
	c.mu.Unlock()
	return c.Exec.Restore(ctx, f, text)
}

func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// run applies cfg in ns with the given backend and returns the transactions it made.
func run(t testing.TB, ns *netnstest.NS, cfg *Config, m ipt.Mode) []string {
	t.Helper()
	c := *cfg
	c.NetworkNamespace, c.Backend = ns.Path, m
	r := &countingRunner{Exec: ipt.Exec{Mode: m}}
	if err := Run(context.Background(), &c, testLog(t), Env{Runner: func(ipt.Mode) ipt.Runner { return r }, Out: io.Discard}); err != nil {
		t.Fatalf("run %s: %v", m, err)
	}
	return r.restores
}

// save returns the namespace's rules for a backend and family, parsed.
func save(t testing.TB, ns *netnstest.NS, m ipt.Mode, f ipt.Family) *ipt.State {
	t.Helper()
	bin := "iptables-" + string(m) + "-save"
	if f == ipt.IPv6 {
		bin = "ip6" + bin[2:]
	}
	st, err := ipt.ParseSave(ns.Exec(t, bin))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestGoldenRulesApplyVerbatim applies every golden configuration with both
// backends and checks that the kernel holds exactly the rules we render (so
// a rerun plans nothing), then that cleanup leaves none of ours.
func TestGoldenRulesApplyVerbatim(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, m := range backends {
		for _, gc := range goldenCases {
			t.Run(string(m)+"/"+gc.name, func(t *testing.T) {
				t.Parallel()
				ns := netnstest.New(t)
				cfg := gc.config(t)
				if first := run(t, ns, cfg, m); len(first) == 0 {
					t.Fatal("first run applied nothing")
				}
				for _, rs := range Build(&cfg.Policy) {
					if d := ipt.Drift(rs, save(t, ns, m, rs.Family), Ownership()); len(d) > 0 {
						t.Errorf("%s after apply:\n%s", rs.Family, strings.Join(d, "\n"))
					}
				}
				if again := run(t, ns, cfg, m); len(again) != 0 {
					t.Errorf("rerun with the same flags changed rules:\n%s", strings.Join(again, "\n"))
				}
				clean := *cfg
				clean.CleanupOnly = true
				run(t, ns, &clean, m)
				assertNoResidue(t, ns, m)
			})
		}
	}
}

// assertNoResidue fails if any chain or rule of ours is left in either family.
func assertNoResidue(t testing.TB, ns *netnstest.NS, m ipt.Mode) {
	t.Helper()
	for _, f := range []ipt.Family{ipt.IPv4, ipt.IPv6} {
		st := save(t, ns, m, f)
		for name, tbl := range st.Tables {
			for _, c := range tbl.Chains {
				if strings.HasPrefix(c, "ISTIO_") {
					t.Errorf("%s %s: chain %s left behind", f, name, c)
				}
				for _, r := range tbl.Rules[c] {
					if Ownership().OwnsRule(name, c, r) || strings.Contains(r, "ISTIO_") {
						t.Errorf("%s %s: rule -A %s %s left behind", f, name, c, r)
					}
				}
			}
		}
	}
	if out := ns.Exec(t, "ip", "rule", "show"); strings.Contains(out, "fwmark") {
		t.Errorf("ip rule left behind:\n%s", out)
	}
}

// TestFlagChangeConverges reruns with other flags: one transaction takes the
// namespace to the new rule set, stale chains go, and a foreign rule stays.
func TestFlagChangeConverges(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, m := range backends {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			ns := netnstest.New(t)
			ns.Exec(t, "iptables-"+string(m), "-t", "nat", "-A", "OUTPUT", "-d", "192.0.2.1/32", "-j", "ACCEPT")
			before := goldenCases[4].config(t) // dns-uid-gid-ipv6: raw and nat, both families
			run(t, ns, before, m)
			after := goldenCases[13].config(t) // tproxy-full: mangle too, no more uid 3,4
			tx := run(t, ns, after, m)
			if len(tx) != 2 {
				t.Errorf("flag change took %d transactions, want one per family", len(tx))
			}
			for _, rs := range Build(&after.Policy) {
				if d := ipt.Drift(rs, save(t, ns, m, rs.Family), Ownership()); len(d) > 0 {
					t.Errorf("%s after flag change:\n%s", rs.Family, strings.Join(d, "\n"))
				}
			}
			back := goldenCases[1].config(t) // injector: no DNS, no TPROXY
			run(t, ns, back, m)
			st := save(t, ns, m, ipt.IPv4)
			for _, c := range []string{ChainOutputDNS, ChainDivert, ChainTProxy} {
				for name, tbl := range st.Tables {
					if tbl.HasChain(c) {
						t.Errorf("stale chain %s/%s survived", name, c)
					}
				}
			}
			if d := ipt.Drift(Build(&back.Policy)[0], st, Ownership()); len(d) > 0 {
				t.Errorf("after second change:\n%s", strings.Join(d, "\n"))
			}
			clean := *back
			clean.CleanupOnly = true
			run(t, ns, &clean, m)
			assertNoResidue(t, ns, m)
			if got := save(t, ns, m, ipt.IPv4).Table(ipt.NAT).Rules["OUTPUT"]; len(got) != 1 || got[0] != "-d 192.0.2.1/32 -j ACCEPT" {
				t.Errorf("foreign rule not kept intact: %q", got)
			}
		})
	}
}

// TestLegacyProbeRegression reproduces Istio's bug: an empty legacy nat table
// (what Istio's own detection leaves) must not make the next runs choose
// legacy and install every rule twice.
func TestLegacyProbeRegression(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	ns.Exec(t, "iptables-legacy", "-t", "nat", "-L", "-n") // instantiates an empty legacy nat table
	cfg := Injector()
	for i := 0; i < 2; i++ {
		c := cfg
		c.NetworkNamespace = ns.Path
		if err := Run(context.Background(), &c, testLog(t), Env{Out: io.Discard}); err != nil {
			t.Fatal(err)
		}
	}
	if n := save(t, ns, ipt.Legacy, ipt.IPv4).RuleCount(); n != 0 {
		t.Errorf("legacy holds %d rules, want 0", n)
	}
	st := save(t, ns, ipt.NFT, ipt.IPv4)
	if d := ipt.Drift(Build(&cfg.Policy)[0], st, Ownership()); len(d) > 0 {
		t.Errorf("nft rules after two runs:\n%s", strings.Join(d, "\n"))
	}
}

// TestDetectJoinsLegacy: when legacy already holds rules, detection picks legacy.
func TestDetectJoinsLegacy(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	ns.Exec(t, "iptables-legacy", "-t", "filter", "-A", "INPUT", "-s", "192.0.2.1/32", "-j", "ACCEPT")
	var got ipt.Mode
	ns.Do(t, func() (err error) {
		got, err = ipt.Detect(context.Background())
		return err
	})
	if got != ipt.Legacy {
		t.Errorf("Detect = %q, want legacy", got)
	}
}

// TestConcurrentNamespaces programs 20 namespaces at once per backend.
func TestConcurrentNamespaces(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			cfg := Injector()
			cfg.RedirectDNS, cfg.CaptureAllDNS = true, true // anonymous sets in nftables too
			var nss []*netnstest.NS
			for i := 0; i < 20; i++ {
				nss = append(nss, netnstest.New(t))
			}
			var wg sync.WaitGroup
			errs := make(chan error, len(nss))
			for _, ns := range nss {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := runWith(ns, &cfg, b, slog.New(slog.DiscardHandler)); err != nil {
						errs <- fmt.Errorf("%s: %w", ns.Name, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for _, ns := range nss {
				b.holds(t, ns, &cfg.Policy)
			}
		})
	}
}
