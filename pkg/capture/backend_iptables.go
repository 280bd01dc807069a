package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// iptBackend programs rules with iptables-restore --noflush, one
// transaction per family, through the legacy or nft binaries.
type iptBackend struct {
	mode ipt.Mode
	// detected is set when mode was detected rather than forced: cleanup
	// then also empties legacy tables that exist beside the detected mode.
	detected bool
	runner   func(ipt.Mode) ipt.Runner
	host     Host
	out      io.Writer
	log      *slog.Logger
}

var _ backend = (*iptBackend)(nil)

func (b *iptBackend) name() string { return "iptables " + modeName(b.mode) }

func (b *iptBackend) apply(ctx context.Context, p *Policy, force, dryRun bool) error {
	r := b.runner(b.mode)
	var txs []transaction
	for _, rs := range Build(p) {
		cur := &ipt.State{}
		if !b.nothingThere(rs.Family) {
			var err error
			if cur, err = readState(ctx, r, rs.Family); err != nil {
				if !dryRun {
					return err
				}
				cur = &ipt.State{}
			}
		}
		text := ipt.Plan(rs, cur, Ownership())
		if force {
			text = ipt.PlanRewrite(rs, cur, Ownership())
		}
		if dryRun {
			fmt.Fprintf(b.out, "# %s, iptables %s: %s\n%s", rs.Family, modeName(b.mode), summary(text), text)
			continue
		}
		if text == "" {
			b.log.Info("rules already in place", "family", rs.Family, "backend", modeName(b.mode))
			continue
		}
		txs = append(txs, transaction{family: rs.Family, mode: b.mode, text: text, rules: len(rs.Rules)})
	}
	return b.restore(ctx, r, txs)
}

// transaction is one family's iptables-restore input: rules to apply, or
// (removal) ours to remove.
type transaction struct {
	family  ipt.Family
	mode    ipt.Mode
	text    string
	rules   int
	removal bool
}

func (tx transaction) verb() string {
	if tx.removal {
		return "remove"
	}
	return "apply"
}

// restore runs the transactions: at once when the runner can start them
// (each iptables-restore is its own atomic commit, and the families'
// tables are apart), else one after the other. Both are started from the
// calling thread, so both run in its namespace. It returns once all have
// ended, with every failure; none is started after one fails to start.
func (b *iptBackend) restore(ctx context.Context, r ipt.Runner, txs []transaction) error {
	start := time.Now()
	s := starter(r)
	waits := make([]func() error, len(txs))
	var errs []error
	for i, tx := range txs {
		var err error
		if waits[i], err = s.StartRestore(ctx, tx.family, tx.text); err != nil {
			errs = append(errs, fmt.Errorf("%s %s rules: %w", tx.verb(), tx.family, err))
			break
		}
	}
	for i, wait := range waits {
		if wait == nil {
			continue
		}
		if err := wait(); err != nil {
			errs = append(errs, fmt.Errorf("%s %s rules: %w", txs[i].verb(), txs[i].family, err))
			continue
		}
		b.applied(txs[i], start)
	}
	return errors.Join(errs...)
}

// starter is r as an ipt.Starter: itself, or one whose start runs the
// whole restore, so that transactions run one after the other.
func starter(r ipt.Runner) ipt.Starter {
	if s, ok := r.(ipt.Starter); ok {
		return s
	}
	return syncStarter{r}
}

type syncStarter struct{ ipt.Runner }

func (s syncStarter) StartRestore(ctx context.Context, f ipt.Family, text string) (func() error, error) {
	if err := s.Restore(ctx, f, text); err != nil {
		return nil, err
	}
	return func() error { return nil }, nil
}

func (b *iptBackend) applied(tx transaction, start time.Time) {
	if tx.removal {
		b.log.Info("rules removed", "family", tx.family, "backend", modeName(tx.mode), "took", time.Since(start))
		return
	}
	b.log.Info("rules applied", "family", tx.family, "backend", modeName(tx.mode), "rules", tx.rules, "took", time.Since(start))
}

// cleanup removes every chain and rule istio-iptables owns, in every table
// and family, from the backend's mode and, when the mode was detected, from
// legacy xtables too if they hold any table (left there by Istio's
// backend-detection bug).
func (b *iptBackend) cleanup(ctx context.Context, dryRun bool) error {
	modes := []ipt.Mode{b.mode}
	if b.mode != ipt.Legacy && b.detected && (b.host.LegacyTables(ipt.IPv4) || b.host.LegacyTables(ipt.IPv6)) {
		modes = append(modes, ipt.Legacy)
	}
	for _, m := range modes {
		r := b.runner(m)
		var txs []transaction
		for _, f := range []ipt.Family{ipt.IPv4, ipt.IPv6} {
			cur, err := readState(ctx, r, f)
			if err != nil {
				return err
			}
			text := ipt.Plan(&ipt.Ruleset{Family: f}, cur, Ownership())
			if dryRun {
				fmt.Fprintf(b.out, "# %s, iptables %s, cleanup: %s\n%s", f, modeName(m), summary(text), text)
				continue
			}
			if text != "" {
				txs = append(txs, transaction{family: f, mode: m, text: text, removal: true})
			}
		}
		// The families' removals run at once, as their installs do.
		if err := b.restore(ctx, r, txs); err != nil {
			return err
		}
	}
	return nil
}

func (b *iptBackend) drift(ctx context.Context, p *Policy) ([]string, error) {
	r := b.runner(b.mode)
	var out []string
	for _, rs := range Build(p) {
		cur, err := readState(ctx, r, rs.Family)
		if err != nil {
			return nil, err
		}
		for _, d := range ipt.Drift(rs, cur, Ownership()) {
			out = append(out, rs.Family.String()+" "+d)
		}
	}
	return out, nil
}

// nothingThere reports whether the backend certainly holds no table of the
// family in this namespace (a new pod), so iptables-save need not run: the
// kernel is asked directly, without a process.
func (b *iptBackend) nothingThere(f ipt.Family) bool {
	switch b.mode {
	case ipt.Legacy:
		return !b.host.LegacyTables(f)
	case ipt.NFT:
		return !b.host.NFTablesInUse(f)
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
