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
	assertNoRouting(t, ns)
	if out := ns.Exec(t, "ip", "-6", "addr", "show", "dev", "lo"); strings.Contains(out, "::6/128") {
		t.Errorf("::6 left on lo:\n%s", out)
	}
}

// assertNoRouting fails if a TPROXY rule or local default route of either
// family is in ns.
func assertNoRouting(t testing.TB, ns *netnstest.NS) {
	t.Helper()
	for _, f := range []string{"-4", "-6"} {
		if out := ns.Exec(t, "ip", f, "rule", "show"); strings.Contains(out, "fwmark") {
			t.Errorf("ip %s rule left behind:\n%s", f, out)
		}
		if out := ns.Exec(t, "ip", f, "route", "show", "table", "all"); strings.Contains(out, "local default dev lo") {
			t.Errorf("ip %s local default route left behind:\n%s", f, out)
		}
	}
}

// TestNFTablesMatchNFT programs every golden configuration through netlink
// and checks that the kernel holds the very expressions "nft -f" of our
// dry-run script loads. (TestGoldenRulesApply checks the rest with every
// backend.)
func TestNFTablesMatchNFT(t *testing.T) {
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
			runNFT(t, ns, cfg)
			ref := netnstest.New(t)
			script := filepath.Join(t.TempDir(), "rules.nft")
			if err := os.WriteFile(script, []byte(p.Script()), 0o644); err != nil {
				t.Fatal(err)
			}
			ref.Exec(t, "nft", "-f", script)
			if got, want := expressions(t, ns), expressions(t, ref); got != want {
				t.Errorf("netlink expressions differ from nft -f of the script (-ours +nft):\n%s", lineDiff(got, want))
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
