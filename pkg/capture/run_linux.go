package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/nftables"
)

// Env is where Run finds what it reads and runs besides the Config.
type Env struct {
	// Runner makes the iptables Runner for a mode; nil runs the real binaries.
	Runner func(ipt.Mode) ipt.Runner
	// ResolvConf is the path of resolv.conf; "" is /etc/resolv.conf.
	ResolvConf string
	// Out receives dry-run output.
	Out io.Writer
}

func (e Env) runner(m ipt.Mode) ipt.Runner {
	if e.Runner != nil {
		return e.Runner(m)
	}
	return &ipt.Exec{Mode: m}
}

// Run applies cfg to the network namespace it names (or the current one):
// it converges the rules of each family in one iptables-restore transaction,
// or with NativeNFTables all of them in one nftables netlink batch (nothing
// is written when they already match), sets up TPROXY routing, and runs the
// validation probe when asked. With CleanupOnly it removes everything
// istio-iptables owns, in both backends, instead; with DryRun it prints the
// transactions and changes nothing.
func Run(ctx context.Context, cfg *Config, log *slog.Logger, env Env) error {
	if env.Out == nil {
		env.Out = os.Stdout
	}
	return netns.Do(cfg.NetworkNamespace, func() error {
		if !cfg.SkipRuleApply {
			var err error
			if cfg.NativeNFTables {
				err = runNFTables(ctx, cfg, log, env)
			} else if cfg.CleanupOnly {
				err = cleanup(ctx, cfg, log, env)
			} else {
				err = apply(ctx, cfg, log, env)
			}
			if err != nil {
				return err
			}
		}
		if cfg.RunValidation && !cfg.DryRun {
			if err := Validate(ctx, cfg); err != nil {
				return err
			}
			log.Info("validation passed", "probe_port", cfg.ProbePort)
		}
		return nil
	})
}

// Resolve fills in what the Config takes from the namespace: the resolv.conf
// nameservers to capture DNS for, and whether IPv6 is programmed.
func Resolve(cfg *Config, resolvConf string) error {
	if cfg.RedirectDNS && !cfg.CaptureAllDNS && len(cfg.DNSServersV4)+len(cfg.DNSServersV6) == 0 {
		if resolvConf == "" {
			resolvConf = "/etc/resolv.conf"
		}
		v4, v6, err := Nameservers(resolvConf)
		if err != nil {
			return err
		}
		cfg.DNSServersV4, cfg.DNSServersV6 = v4, v6
	}
	if !cfg.EnableIPv6 {
		v6, err := hasGlobalIPv6()
		if err != nil {
			return err
		}
		cfg.EnableIPv6 = cfg.DualStack || v6
	}
	return nil
}

func mode(ctx context.Context, cfg *Config) (ipt.Mode, error) {
	if cfg.Backend != ipt.Plain {
		return cfg.Backend, nil
	}
	return ipt.Detect(ctx)
}

func apply(ctx context.Context, cfg *Config, log *slog.Logger, env Env) error {
	if err := Resolve(cfg, env.ResolvConf); err != nil {
		return err
	}
	m, err := mode(ctx, cfg)
	if err != nil {
		return fmt.Errorf("detect iptables backend: %w", err)
	}
	r := env.runner(m)
	for _, rs := range Build(cfg) {
		start := time.Now()
		cur := &ipt.State{}
		if !nothingThere(m, rs.Family) {
			if cur, err = readState(ctx, r, rs.Family); err != nil {
				if !cfg.DryRun {
					return err
				}
				cur = &ipt.State{}
			}
		}
		text := ipt.Plan(rs, cur, Ownership)
		if cfg.ForceApply {
			text = ipt.PlanRewrite(rs, cur, Ownership)
		}
		if cfg.DryRun {
			fmt.Fprintf(env.Out, "# %s, iptables %s: %s\n%s", rs.Family, modeName(m), summary(text), text)
			continue
		}
		if text == "" {
			log.Info("rules already in place", "family", rs.Family, "backend", modeName(m))
			continue
		}
		if err := r.Restore(ctx, rs.Family, text); err != nil {
			return fmt.Errorf("apply %s rules: %w", rs.Family, err)
		}
		log.Info("rules applied", "family", rs.Family, "backend", modeName(m), "rules", len(rs.Rules), "took", time.Since(start))
	}
	if cfg.DryRun {
		return nil
	}
	// Rules of the other backend (a switch from --native-nftables) would capture twice.
	if present, err := nftables.Present(nftables.Options{}); err == nil && len(present) > 0 {
		if _, err := nftables.Cleanup(nftables.Options{}); err != nil {
			return fmt.Errorf("remove native nftables rules of an earlier run: %w", err)
		}
		log.Info("removed native nftables rules of an earlier run", "tables", present)
	}
	return afterApply(cfg)
}

// afterApply sets up what both backends need besides rules: ::6 on lo for
// IPv6, and TPROXY policy routing (or its removal in REDIRECT mode).
func afterApply(cfg *Config) error {
	if cfg.EnableIPv6 {
		if err := addPassthroughV6(); err != nil {
			return err
		}
	}
	if cfg.InboundMode == TProxy {
		families := []bool{false}
		if cfg.EnableIPv6 {
			families = append(families, true)
		}
		return setupRouting(cfg, families)
	}
	return cleanupRouting(cfg)
}

// nothingThere reports whether the backend certainly holds no table of the
// family in this namespace (a new pod), so iptables-save need not run: the
// kernel is asked directly, without a process.
func nothingThere(m ipt.Mode, f ipt.Family) bool {
	switch m {
	case ipt.Legacy:
		return !ipt.LegacyFamilyInUse(f)
	case ipt.NFT:
		used, err := nftables.FamilyInUse(nftables.Options{}, f == ipt.IPv6)
		return err == nil && !used
	}
	return false
}

func summary(text string) string {
	if text == "" {
		return "up to date, nothing to apply"
	}
	return "iptables-restore --noflush input"
}

func modeName(m ipt.Mode) string {
	if m == ipt.Plain {
		return "default"
	}
	return string(m)
}

func readState(ctx context.Context, r ipt.Runner, f ipt.Family) (*ipt.State, error) {
	text, err := r.Save(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("read %s rules: %w", f, err)
	}
	st, err := ipt.ParseSave(text)
	if err != nil {
		return nil, fmt.Errorf("parse %s rules: %w", f, err)
	}
	return st, nil
}

// cleanup removes every chain and rule istio-iptables owns, in every table and
// family, from the detected backend and from legacy xtables if they hold any
// (left there by Istio's backend-detection bug), plus TPROXY routing and ::6.
func cleanup(ctx context.Context, cfg *Config, log *slog.Logger, env Env) error {
	m, err := mode(ctx, cfg)
	if err != nil {
		return fmt.Errorf("detect iptables backend: %w", err)
	}
	modes := []ipt.Mode{m}
	if m != ipt.Legacy && cfg.Backend == ipt.Plain {
		if used, _ := ipt.LegacyTablesExist(); used {
			modes = append(modes, ipt.Legacy)
		}
	}
	for _, m := range modes {
		r := env.runner(m)
		for _, f := range []ipt.Family{ipt.IPv4, ipt.IPv6} {
			cur, err := readState(ctx, r, f)
			if err != nil {
				return err
			}
			text := ipt.Plan(&ipt.Ruleset{Family: f}, cur, Ownership)
			if cfg.DryRun {
				fmt.Fprintf(env.Out, "# %s, iptables %s, cleanup: %s\n%s", f, modeName(m), summary(text), text)
				continue
			}
			if text == "" {
				continue
			}
			if err := r.Restore(ctx, f, text); err != nil {
				return fmt.Errorf("remove %s rules: %w", f, err)
			}
			log.Info("rules removed", "family", f, "backend", modeName(m))
		}
	}
	if cfg.DryRun {
		return nil
	}
	_, nftErr := nftables.Cleanup(nftables.Options{})
	return errors.Join(nftErr, cleanupRouting(cfg), removePassthroughV6())
}
