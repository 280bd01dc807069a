package capture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/nftables"
)

// runNFTables is Run's --native-nftables backend, in the namespace Run
// entered: the rules Build makes, translated into Istio's inet tables and
// programmed over netlink in one transaction (no nft binary), or removed
// with CleanupOnly, or printed as an "nft -f" script with DryRun.
func runNFTables(ctx context.Context, cfg *Config, log *slog.Logger, env Env) error {
	log = log.With("backend", "nftables")
	if cfg.CleanupOnly {
		return cleanupNFTables(ctx, cfg, log, env)
	}
	return applyNFTables(ctx, cfg, log, env)
}

// nftProgram returns the nftables program of a resolved config: the
// rules of Build, for every family it programs, in Istio's inet tables.
func nftProgram(cfg *Config) (*nftables.Program, error) {
	p, err := nftables.Translate(Build(cfg))
	if err != nil {
		return nil, fmt.Errorf("native nftables: %w", err)
	}
	return p, nil
}

func applyNFTables(ctx context.Context, cfg *Config, log *slog.Logger, env Env) error {
	if err := Resolve(cfg, env.ResolvConf); err != nil {
		return err
	}
	prog, err := nftProgram(cfg)
	if err != nil {
		return err
	}
	opts := nftables.Options{Force: cfg.ForceApply}
	if cfg.DryRun {
		summary := "one transaction replaces our tables"
		switch ok, err := nftables.InSync(prog, opts); {
		case err != nil:
			summary += " (current rules unreadable: " + err.Error() + ")"
		case ok && !cfg.ForceApply:
			summary = "up to date, nothing to apply"
		}
		fmt.Fprintf(env.Out, "# nftables inet: %s\n%s", summary, prog.Script())
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	res, err := nftables.Apply(prog, opts)
	if err != nil {
		return err
	}
	if res.Changed {
		log.Info("rules applied", "tables", len(prog.Tables), "rules", prog.RuleCount(), "removed", res.Removed, "took", time.Since(start))
	} else {
		log.Info("rules already in place", "tables", len(prog.Tables))
	}
	return afterApply(cfg)
}

// cleanupNFTables deletes our inet tables (and nothing else), the TPROXY
// routing and ::6 on lo.
func cleanupNFTables(ctx context.Context, cfg *Config, log *slog.Logger, env Env) error {
	if cfg.DryRun {
		present, err := nftables.Present(nftables.Options{})
		summary := "nothing to remove"
		if err != nil {
			present, summary = nftables.OwnedTables(), "current rules unreadable ("+err.Error()+"), would remove any of"
		} else if len(present) > 0 {
			summary = "one transaction removes"
		}
		var b strings.Builder
		for _, t := range present {
			fmt.Fprintf(&b, "delete table inet %s\n", t)
		}
		fmt.Fprintf(env.Out, "# nftables inet, cleanup: %s\n%s", summary, b.String())
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	removed, err := nftables.Cleanup(nftables.Options{})
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		log.Info("rules removed", "tables", removed)
	}
	return errors.Join(cleanupRouting(cfg), removePassthroughV6())
}
