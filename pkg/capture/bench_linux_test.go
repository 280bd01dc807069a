package capture

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// freshNS makes a namespace outside the benchmark timer and returns its path and remover.
func freshNS(b *testing.B) (string, func()) {
	b.StopTimer()
	defer b.StartTimer()
	name := netnstest.UniqueName("skb-")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		b.Fatalf("ip netns add: %v: %s", err, out)
	}
	return "/run/netns/" + name, func() { _ = exec.Command("ip", "netns", "del", name).Run() }
}

// BenchmarkFirstInstall installs the injector's rules in a fresh namespace:
// Skiff's one-restore-per-family path against a one-iptables-call-per-rule
// installer of the same rules, and Skiff's native nftables (one netlink
// batch, no process). procs/op counts child processes.
func BenchmarkFirstInstall(b *testing.B) {
	netnstest.RequireRoot(b)
	cfg := Injector()
	b.Run("skiff/native-nftables", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			path, del := freshNS(b)
			c := cfg
			c.NetworkNamespace, c.NativeNFTables = path, true
			if err := Run(context.Background(), &c, slog.New(slog.DiscardHandler), Env{Out: io.Discard}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			del()
			b.StartTimer()
		}
		b.ReportMetric(0, "procs/op")
	})
	for _, m := range backends {
		b.Run("skiff/"+string(m), func(b *testing.B) { benchRestore(b, cfg, m, false) })
		// A dual-stack pod: one transaction per family, run at once; and,
		// for comparison, one after the other as Istio runs them.
		dual := cfg
		dual.EnableIPv6 = true
		b.Run("skiff/"+string(m)+"/dual-stack", func(b *testing.B) { benchRestore(b, dual, m, false) })
		b.Run("skiff/"+string(m)+"/dual-stack-sequential", func(b *testing.B) { benchRestore(b, dual, m, true) })
		b.Run("per-rule/"+string(m), func(b *testing.B) {
			cmds := perRuleCommands(Build(&cfg.Policy)[0], m)
			for i := 0; i < b.N; i++ {
				path, del := freshNS(b)
				err := netns.Do(path, func() error {
					for _, args := range cmds {
						if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
							return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				del()
				b.StartTimer()
			}
			b.ReportMetric(float64(len(cmds)), "procs/op")
		})
	}
}

// benchRestore installs cfg with iptables-restore in mode m; sequential
// hides the runner's StartRestore, so the families' restores run one after
// the other.
func benchRestore(b *testing.B, cfg Config, m ipt.Mode, sequential bool) {
	procs := 0
	for i := 0; i < b.N; i++ {
		path, del := freshNS(b)
		e := &ipt.Exec{Mode: m}
		var r ipt.Runner = e
		if sequential {
			r = struct{ ipt.Runner }{e}
		}
		c := cfg
		c.NetworkNamespace, c.Backend = path, m
		if err := Run(context.Background(), &c, slog.New(slog.DiscardHandler), Env{Runner: func(ipt.Mode) ipt.Runner { return r }, Out: io.Discard}); err != nil {
			b.Fatal(err)
		}
		procs += e.Spawned
		b.StopTimer()
		del()
		b.StartTimer()
	}
	b.ReportMetric(float64(procs)/float64(b.N), "procs/op")
}

// perRuleCommands is how a one-exec-per-rule installer (Istio before it
// batched, and many others) programs a ruleset: -N per chain, then -A or -I per rule.
func perRuleCommands(rs *ipt.Ruleset, m ipt.Mode) [][]string {
	bin := "iptables-" + string(m)
	var wait []string
	if m == ipt.Legacy {
		wait = []string{"-w"}
	}
	var out [][]string
	for _, c := range rs.Chains {
		out = append(out, append(append([]string{bin}, wait...), "-t", c.Table, "-N", c.Chain))
	}
	for _, r := range rs.Rules {
		args := append(append([]string{bin}, wait...), "-t", r.Table, "-A", r.Chain)
		if r.Head {
			args = append(append([]string{bin}, wait...), "-t", r.Table, "-I", r.Chain, "1")
		}
		out = append(out, append(args, strings.Fields(r.Spec())...))
	}
	return out
}
