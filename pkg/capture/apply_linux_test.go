package capture

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
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
	// transactions runs cfg in ns and returns how many transactions it committed.
	transactions func(t testing.TB, ns *netnstest.NS, cfg *Config) int
	// perFamily is set when each family is its own transaction (iptables);
	// else one transaction programs everything.
	perFamily bool
	// foreign installs rules or tables that are not ours and returns a
	// function that lists them, to show that Run leaves them alone.
	foreign func(t testing.TB, ns *netnstest.NS) func() string
}

// wantTransactions is how many transactions b takes to converge to p from anything else.
func (b testBackend) wantTransactions(p *Policy) int {
	if b.perFamily {
		return len(Build(p))
	}
	return 1
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
		transactions: func(t testing.TB, ns *netnstest.NS, cfg *Config) int {
			t.Helper()
			return len(run(t, ns, cfg, m))
		},
		perFamily: true,
		foreign: func(t testing.TB, ns *netnstest.NS) func() string {
			ns.Exec(t, "iptables-"+string(m), "-t", "nat", "-A", "OUTPUT", "-d", "192.0.2.1/32", "-j", "ACCEPT")
			return func() string {
				return strings.Join(slices.DeleteFunc(save(t, ns, m, ipt.IPv4).Table(ipt.NAT).Rules["OUTPUT"], func(r string) bool {
					return Ownership().OwnsRule(ipt.NAT, "OUTPUT", r) || strings.Contains(r, "ISTIO_")
				}), "\n")
			}
		},
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
		transactions: func(t testing.TB, ns *netnstest.NS, cfg *Config) int {
			t.Helper()
			g := generation(t, ns)
			runNFT(t, ns, cfg)
			return int(generation(t, ns) - g)
		},
		foreign: func(t testing.TB, ns *netnstest.NS) func() string {
			ns.Exec(t, "nft", "add table inet foreign")
			ns.Exec(t, "nft", "add chain inet foreign out { type filter hook output priority 0; policy accept; }")
			ns.Exec(t, "nft", "add rule inet foreign out ip daddr 192.0.2.1 counter accept")
			ns.Exec(t, "nft", "add table ip istio-proxy-nat") // our name, another family
			ns.Exec(t, "nft", "add chain ip istio-proxy-nat mine")
			return func() string {
				return ns.Exec(t, "nft", "list", "table", "inet", "foreign") + ns.Exec(t, "nft", "list", "table", "ip", "istio-proxy-nat")
			}
		},
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
	c.count(text)
	return c.Exec.Restore(ctx, f, text)
}

// StartRestore counts too, so that the families' restores run at once as
// with the plain Exec.
func (c *countingRunner) StartRestore(ctx context.Context, f ipt.Family, text string) (func() error, error) {
	c.count(text)
	return c.Exec.StartRestore(ctx, f, text)
}

func (c *countingRunner) count(text string) {
	c.mu.Lock()
	c.restores = append(c.restores, text)
	c.mu.Unlock()
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

// TestGoldenRulesApply applies every golden configuration with every
// backend and checks that it takes one transaction (per family with
// iptables), that the kernel then holds exactly the rules we render, that a
// rerun commits nothing, and that cleanup leaves none of ours and is a
// no-op the second time.
func TestGoldenRulesApply(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		for _, gc := range goldenCases {
			t.Run(b.name+"/"+gc.name, func(t *testing.T) {
				t.Parallel()
				ns := netnstest.New(t)
				cfg := gc.config(t)
				if n, want := b.transactions(t, ns, cfg), b.wantTransactions(&cfg.Policy); n != want {
					t.Errorf("apply took %d transactions, want %d", n, want)
				}
				b.holds(t, ns, &cfg.Policy)
				if n := b.transactions(t, ns, cfg); n != 0 {
					t.Errorf("rerun with the same flags committed %d transactions", n)
				}
				clean := *cfg
				clean.CleanupOnly = true
				b.transactions(t, ns, &clean)
				b.residue(t, ns)
				if n := b.transactions(t, ns, &clean); n != 0 {
					t.Errorf("second cleanup committed %d transactions", n)
				}
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
	assertNoRouting(t, ns)
}

// TestFlagChangeConverges reruns with other flags: each change is one
// transaction (per family with iptables) that takes the namespace to the
// new rules, stale chains or tables go, and foreign rules survive it all.
func TestFlagChangeConverges(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, b := range testBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ns := netnstest.New(t)
			foreign := b.foreign(t, ns)
			before := foreign()
			var last *Config
			for _, gc := range []goldenCase{
				goldenCases[4],  // dns-uid-gid-ipv6: raw and nat, both families
				goldenCases[13], // tproxy-full: mangle too, no more uid 3,4
				goldenCases[1],  // injector: nat only, no DNS, no TPROXY
			} {
				cfg := gc.config(t)
				if n, want := b.transactions(t, ns, cfg), b.wantTransactions(&cfg.Policy); n != want {
					t.Errorf("%s: converged in %d transactions, want %d", gc.name, n, want)
				}
				b.holds(t, ns, &cfg.Policy) // stale chains and tables count as drift
				if cfg.InboundMode != TProxy {
					assertNoRouting(t, ns) // REDIRECT after TPROXY removes its routing
				}
				last = cfg
			}
			cleanupWith(t, ns, last, b)
			if after := foreign(); after != before {
				t.Errorf("foreign rules changed:\nbefore:\n%s\nafter:\n%s", before, after)
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
