package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/nftables"
)

// errUnreadable marks a backend whose current rules could not be read, so
// it cannot be holding rules of an earlier run that anyone could rely on.
var errUnreadable = errors.New("current rules unreadable")

// nftBackend is --native-nftables: the rules Build makes, translated into
// Istio's inet tables and programmed over netlink in one transaction (no nft
// binary), or printed as an "nft -f" script on a dry run.
type nftBackend struct {
	k   NFTables
	out io.Writer
	log *slog.Logger
}

var _ backend = (*nftBackend)(nil)

func (b *nftBackend) name() string { return "native nftables" }

// nftProgram returns the nftables program of a resolved policy: the
// rules of Build, for every family it programs, in Istio's inet tables.
func nftProgram(p *Policy) (*nftables.Program, error) {
	prog, err := nftables.Translate(Build(p))
	if err != nil {
		return nil, fmt.Errorf("native nftables: %w", err)
	}
	return prog, nil
}

func (b *nftBackend) apply(ctx context.Context, p *Policy, force, dryRun bool) error {
	prog, err := nftProgram(p)
	if err != nil {
		return err
	}
	if dryRun {
		summary := "one transaction replaces our tables"
		switch ok, err := b.k.InSync(prog); {
		case err != nil:
			summary += " (current rules unreadable: " + err.Error() + ")"
		case ok && !force:
			summary = "up to date, nothing to apply"
		}
		fmt.Fprintf(b.out, "# nftables inet: %s\n%s", summary, prog.Script())
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	res, err := b.k.Apply(prog, force)
	if err != nil {
		return err
	}
	if res.Changed {
		b.log.Info("rules applied", "tables", len(prog.Tables), "rules", prog.RuleCount(), "removed", res.Removed, "took", time.Since(start))
	} else {
		b.log.Info("rules already in place", "tables", len(prog.Tables))
	}
	return nil
}

// cleanup deletes our inet tables, and nothing else.
func (b *nftBackend) cleanup(ctx context.Context, dryRun bool) error {
	present, err := b.k.Present()
	if dryRun {
		summary := "nothing to remove"
		if err != nil {
			present, summary = nftables.OwnedTables(), "current rules unreadable ("+err.Error()+"), would remove any of"
		} else if len(present) > 0 {
			summary = "one transaction removes"
		}
		var s strings.Builder
		for _, t := range present {
			fmt.Fprintf(&s, "delete table inet %s\n", t)
		}
		fmt.Fprintf(b.out, "# nftables inet, cleanup: %s\n%s", summary, s.String())
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errUnreadable, err)
	}
	if len(present) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	removed, err := b.k.Cleanup()
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		b.log.Info("rules removed", "tables", removed)
	}
	return nil
}

func (b *nftBackend) drift(_ context.Context, p *Policy) ([]string, error) {
	prog, err := nftProgram(p)
	if err != nil {
		return nil, err
	}
	ok, err := b.k.InSync(prog)
	if err != nil {
		return nil, err
	}
	if !ok {
		return []string{"nftables: our inet tables differ from what the pod's annotations call for"}, nil
	}
	return nil, nil
}
