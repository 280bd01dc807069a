package capture

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
	"github.com/skiff-mesh/skiff/pkg/nftables"
)

// TestNFTablesGolden renders every golden configuration as the "nft -f"
// script the dry run prints (testdata/nft-NAME.golden; -update rewrites).
func TestNFTablesGolden(t *testing.T) {
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			p, err := nftProgram(&gc.config(t).Policy)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "nft-"+gc.name+".golden"), p.Script())
		})
	}
}

// runNFT runs istio-iptables --native-nftables with cfg in ns.
func runNFT(t testing.TB, ns *netnstest.NS, cfg *Config) {
	t.Helper()
	if err := runNFTErr(ns, cfg, testLog(t), io.Discard); err != nil {
		t.Fatalf("run --native-nftables: %v", err)
	}
}

func runNFTErr(ns *netnstest.NS, cfg *Config, log *slog.Logger, out io.Writer) error {
	c := *cfg
	c.NetworkNamespace, c.NativeNFTables = ns.Path, true
	return Run(context.Background(), &c, log, Env{Out: out})
}

func cleanupNFT(t testing.TB, ns *netnstest.NS, cfg *Config) {
	t.Helper()
	c := *cfg
	c.CleanupOnly, c.RunValidation = true, false
	runNFT(t, ns, &c)
}

// generation is the namespace's nftables generation: it moves with every
// committed transaction.
func generation(t testing.TB, ns *netnstest.NS) uint32 {
	t.Helper()
	var g uint32
	ns.Do(t, func() (err error) {
		g, err = nftables.Generation(nftables.Options{})
		return err
	})
	return g
}

// listOurs returns what nft lists for our tables, in program order.
func listOurs(t testing.TB, ns *netnstest.NS) string {
	t.Helper()
	var b strings.Builder
	for _, name := range nftTables(t, ns) {
		if slices.Contains(nftables.OwnedTables(), strings.TrimPrefix(name, "inet ")) {
			b.WriteString(ns.Exec(t, "nft", "list", "table", "inet", strings.TrimPrefix(name, "inet ")))
		}
	}
	return b.String()
}

// nftTables lists the namespace's tables as "family name".
func nftTables(t testing.TB, ns *netnstest.NS) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(ns.Exec(t, "nft", "list", "tables"), "\n") {
		if name, ok := strings.CutPrefix(l, "table "); ok {
			out = append(out, name)
		}
	}
	return out
}

var ruleHeader = regexp.MustCompile(`^(inet \S+ \S+)( \d+)+$`)

// expressions returns the kernel's expressions for every rule and set, as
// nft's netlink debug output prints them, minus handles and user data.
func expressions(t testing.TB, ns *netnstest.NS) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.Split(ns.Exec(t, "nft", "--debug=netlink", "list", "ruleset"), "\n") {
		switch {
		case strings.HasPrefix(l, "inet "):
			b.WriteString(ruleHeader.ReplaceAllString(l, "$1") + "\n")
		case strings.HasPrefix(l, "  [ "), strings.HasPrefix(l, "\telement "),
			strings.HasPrefix(l, "table "), strings.HasPrefix(l, "\t"), l == "}":
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// assertNoNFTResidue fails if any table of ours or TPROXY routing is left.
func assertNoNFTResidue(t testing.TB, ns *netnstest.NS) {
	t.Helper()
	for _, tbl := range nftTables(t, ns) {
		if strings.HasPrefix(tbl, "inet istio-proxy-") {
			t.Errorf("table %s left behind", tbl)
		}
	}
	if out := ns.Exec(t, "ip", "rule", "show"); strings.Contains(out, "fwmark") {
		t.Errorf("ip rule left behind:\n%s", out)
	}
	if out := ns.Exec(t, "ip", "-6", "addr", "show", "dev", "lo"); strings.Contains(out, "::6/128") {
		t.Errorf("::6 left on lo:\n%s", out)
	}
}

// TestNFTablesApplyGolden programs every golden configuration through
// netlink in a fresh namespace and checks that nft lists exactly the text we
// render, that the kernel holds the very expressions "nft -f" of our dry-run
// script loads, that a rerun commits no transaction, and that cleanup leaves
// none of our tables.
func TestNFTablesApplyGolden(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, gc := range goldenCases {
		t.Run(gc.name, func(t *testing.T) {
			t.Parallel()
			ns := netnstest.New(t)
			cfg := gc.config(t)
			p, err := nftProgram(&cfg.Policy)
			if err != nil {
				t.Fatal(err)
			}
			g0 := generation(t, ns)
			runNFT(t, ns, cfg)
			if g := generation(t, ns); g != g0+1 {
				t.Errorf("apply took %d transactions, want 1", g-g0)
			}
			if got := ns.Exec(t, "nft", "list", "ruleset"); got != p.String() {
				t.Errorf("nft lists (-got +want):\n%s", lineDiff(got, p.String()))
			}

			// The dry-run script, loaded by nft itself, gives the same kernel state.
			ref := netnstest.New(t)
			script := filepath.Join(t.TempDir(), "rules.nft")
			if err := os.WriteFile(script, []byte(p.Script()), 0o644); err != nil {
				t.Fatal(err)
			}
			ref.Exec(t, "nft", "-f", script)
			if got, want := expressions(t, ns), expressions(t, ref); got != want {
				t.Errorf("netlink expressions differ from nft -f of the script (-ours +nft):\n%s", lineDiff(got, want))
			}

			g1 := generation(t, ns)
			runNFT(t, ns, cfg)
			if g := generation(t, ns); g != g1 {
				t.Errorf("rerun with the same flags committed %d transactions", g-g1)
			}
			cleanupNFT(t, ns, cfg)
			assertNoNFTResidue(t, ns)
			g2 := generation(t, ns)
			cleanupNFT(t, ns, cfg)
			if g := generation(t, ns); g != g2 {
				t.Errorf("second cleanup committed %d transactions", g-g2)
			}
		})
	}
}

// lineDiff shows the lines only in a (-) or only in b (+), in order.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "-"+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+"+l)
		}
	}
	if len(out) == 0 {
		return "(same lines, different order)\n" + a
	}
	return strings.Join(out, "\n")
}

// TestNFTablesFlagChangeConverges reruns with other flags: each change is
// one transaction, tables the new flags do not need go, and foreign tables
// (including one with our name in another family) survive it all.
func TestNFTablesFlagChangeConverges(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	ns.Exec(t, "nft", "add table inet foreign")
	ns.Exec(t, "nft", "add chain inet foreign out { type filter hook output priority 0; policy accept; }")
	ns.Exec(t, "nft", "add rule inet foreign out ip daddr 192.0.2.1 counter accept")
	ns.Exec(t, "nft", "add table ip istio-proxy-nat")
	ns.Exec(t, "nft", "add chain ip istio-proxy-nat mine")
	foreign := ns.Exec(t, "nft", "list", "table", "inet", "foreign") + ns.Exec(t, "nft", "list", "table", "ip", "istio-proxy-nat")

	steps := []struct {
		name string
		cfg  *Config
	}{
		{"dns-uid-gid-ipv6", goldenCases[4].config(t)}, // raw and nat, both families
		{"tproxy-full", goldenCases[13].config(t)},     // mangle too, no more uid 3,4
		{"injector", goldenCases[1].config(t)},         // nat only
	}
	for _, s := range steps {
		p, err := nftProgram(&s.cfg.Policy)
		if err != nil {
			t.Fatal(err)
		}
		g := generation(t, ns)
		runNFT(t, ns, s.cfg)
		if got := generation(t, ns); got != g+1 {
			t.Errorf("%s: converged in %d transactions, want 1", s.name, got-g)
		}
		if got := listOurs(t, ns); got != p.String() {
			t.Errorf("%s: nft lists (-got +want):\n%s", s.name, lineDiff(got, p.String()))
		}
	}
	for _, tbl := range nftTables(t, ns) {
		if tbl == "inet "+nftables.TableMangle || tbl == "inet "+nftables.TableRaw {
			t.Errorf("stale table %s survived the flag change", tbl)
		}
	}
	cleanupNFT(t, ns, steps[2].cfg)
	assertNoNFTResidue(t, ns)
	after := ns.Exec(t, "nft", "list", "table", "inet", "foreign") + ns.Exec(t, "nft", "list", "table", "ip", "istio-proxy-nat")
	if after != foreign {
		t.Errorf("foreign tables changed:\nbefore:\n%s\nafter:\n%s", foreign, after)
	}
}

// TestNFTablesRepairsDrift: a rule someone added to, or deleted from, our
// tables makes the next run rewrite them.
func TestNFTablesRepairsDrift(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	cfg := Injector()
	p, err := nftProgram(&cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	runNFT(t, ns, &cfg)
	for _, tamper := range []string{
		"insert rule inet istio-proxy-nat istio-output meta l4proto tcp return",
		"flush chain inet istio-proxy-nat istio-redirect",
		"add chain inet istio-proxy-nat extra",
		"add table inet istio-proxy-nat { flags dormant; }",
		"delete table inet istio-proxy-nat",
	} {
		ns.Exec(t, "nft", tamper)
		g := generation(t, ns)
		runNFT(t, ns, &cfg)
		if got := generation(t, ns); got != g+1 {
			t.Errorf("after %q: %d transactions, want 1", tamper, got-g)
		}
		if got := ns.Exec(t, "nft", "list", "ruleset"); got != p.String() {
			t.Errorf("after %q, nft lists (-got +want):\n%s", tamper, lineDiff(got, p.String()))
		}
	}
	// --force-apply writes even when nothing drifted.
	force := cfg
	force.ForceApply = true
	g := generation(t, ns)
	runNFT(t, ns, &force)
	if got := generation(t, ns); got != g+1 {
		t.Errorf("--force-apply: %d transactions, want 1", got-g)
	}
}

// TestNFTablesDryRun: the dry run prints the script and changes nothing.
func TestNFTablesDryRun(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t)
	cfg := Injector()
	p, err := nftProgram(&cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	dry := cfg
	dry.DryRun = true
	var out bytes.Buffer
	g := generation(t, ns)
	if err := runNFTErr(ns, &dry, testLog(t), &out); err != nil {
		t.Fatal(err)
	}
	if want := "# nftables inet: one transaction replaces our tables\n" + p.Script(); out.String() != want {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if generation(t, ns) != g || len(nftTables(t, ns)) != 0 {
		t.Error("dry run changed the namespace")
	}
	runNFT(t, ns, &cfg)
	out.Reset()
	if err := runNFTErr(ns, &dry, testLog(t), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "# nftables inet: up to date, nothing to apply\n") {
		t.Errorf("dry run after apply printed:\n%s", out.String())
	}
	dry.CleanupOnly = true
	out.Reset()
	g = generation(t, ns)
	if err := runNFTErr(ns, &dry, testLog(t), &out); err != nil {
		t.Fatal(err)
	}
	if want := "# nftables inet, cleanup: one transaction removes\ndelete table inet istio-proxy-nat\n"; out.String() != want {
		t.Errorf("cleanup dry run printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if generation(t, ns) != g {
		t.Error("cleanup dry run changed the namespace")
	}
}
