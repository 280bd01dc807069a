package capture

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

// orderRunner is the real Exec runner, logging when each family's restore
// starts and ends.
type orderRunner struct {
	ipt.Exec
	// text replaces a family's transaction, to make it fail.
	text   map[ipt.Family]string
	mu     sync.Mutex
	events []string
}

func (r *orderRunner) event(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *orderRunner) StartRestore(ctx context.Context, f ipt.Family, text string) (func() error, error) {
	if t, ok := r.text[f]; ok {
		text = t
	}
	r.event(fmt.Sprint("start ", f))
	wait, err := r.Exec.StartRestore(ctx, f, text)
	if err != nil {
		return nil, err
	}
	return func() error {
		err := wait()
		r.event(fmt.Sprint("end ", f))
		return err
	}, nil
}

// runOrdered applies a both-families case in a new namespace with r.
func runOrdered(t *testing.T, m ipt.Mode, r *orderRunner) (*netnstest.NS, *Config, error) {
	ns := netnstest.New(t)
	cfg := goldenCases[4].config(t) // dns-uid-gid-ipv6: raw and nat, both families
	cfg.NetworkNamespace, cfg.Backend = ns.Path, m
	err := Run(context.Background(), cfg, testLog(t), Env{Runner: func(ipt.Mode) ipt.Runner { return r }, Out: io.Discard})
	return ns, cfg, err
}

// TestFamiliesRestoreAtOnce: the IPv4 and IPv6 transactions run at once,
// both started from the thread in the pod's namespace, so both land there.
func TestFamiliesRestoreAtOnce(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, m := range backends {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			r := &orderRunner{Exec: ipt.Exec{Mode: m}}
			ns, cfg, err := runOrdered(t, m, r)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"start ipv4", "start ipv6"}; len(r.events) != 4 || !slices.Equal(r.events[:2], want) {
				t.Fatalf("restores %q: want both started before either ended", r.events)
			}
			for _, rs := range Build(&cfg.Policy) {
				if d := ipt.Drift(rs, save(t, ns, m, rs.Family), Ownership()); len(d) > 0 {
					t.Errorf("%s: namespace lacks rules:\n%s", rs.Family, strings.Join(d, "\n"))
				}
			}
		})
	}
}

// TestFamilyRestoreFailureIsReported: a family's failed transaction fails
// the run with the family and iptables-restore's words; it commits nothing
// of its own (each restore is atomic), and the other family's transaction,
// already under way, still completes, as when Istio's sequential restores
// fail at IPv6.
func TestFamilyRestoreFailureIsReported(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, m := range backends {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			r := &orderRunner{Exec: ipt.Exec{Mode: m}, text: map[ipt.Family]string{ipt.IPv6: "*nat\n-A NO_SUCH_CHAIN -j RETURN\nCOMMIT\n"}}
			ns, cfg, err := runOrdered(t, m, r)
			if err == nil || !strings.Contains(err.Error(), "apply ipv6 rules") || strings.Contains(err.Error(), "ipv4") {
				t.Fatalf("run error = %v, want the IPv6 restore's failure alone", err)
			}
			if out := ns.Exec(t, "ip6tables-"+string(m)+"-save"); strings.Contains(out, "ISTIO") {
				t.Errorf("IPv6 rules committed by a failed restore:\n%s", out)
			}
			for _, rs := range Build(&cfg.Policy) {
				if rs.Family == ipt.IPv4 {
					if d := ipt.Drift(rs, save(t, ns, m, rs.Family), Ownership()); len(d) > 0 {
						t.Errorf("ipv4 restore did not complete:\n%s", strings.Join(d, "\n"))
					}
				}
			}
		})
	}
}

// TestFamiliesRemovedAtOnce: the cleanup's IPv4 and IPv6 removals run at
// once too, and leave neither family any of our chains.
func TestFamiliesRemovedAtOnce(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, m := range backends {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			ns, cfg, err := runOrdered(t, m, &orderRunner{Exec: ipt.Exec{Mode: m}})
			if err != nil {
				t.Fatal(err)
			}
			r := &orderRunner{Exec: ipt.Exec{Mode: m}}
			clean := *cfg
			clean.CleanupOnly, clean.RunValidation = true, false
			if err := Run(context.Background(), &clean, testLog(t), Env{Runner: func(ipt.Mode) ipt.Runner { return r }, Out: io.Discard}); err != nil {
				t.Fatal(err)
			}
			if want := []string{"start ipv4", "start ipv6"}; len(r.events) != 4 || !slices.Equal(r.events[:2], want) {
				t.Fatalf("removals %q: want both started before either ended", r.events)
			}
			for _, f := range []ipt.Family{ipt.IPv4, ipt.IPv6} {
				for table, tbl := range save(t, ns, m, f).Tables {
					for _, name := range tbl.Chains {
						if slices.Contains(Ownership().Chains, name) {
							t.Errorf("%s %s: chain %s left", f, table, name)
						}
					}
				}
			}
		})
	}
}
