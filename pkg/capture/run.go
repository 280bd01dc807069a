package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/nftables"
)

// Env is what Run and Check read and change besides their arguments. Every
// field may be left nil: the zero Env runs the real binaries and asks the
// kernel, in the namespace Run entered.
type Env struct {
	// Runner makes the iptables Runner for a mode; nil runs the real binaries.
	Runner func(ipt.Mode) ipt.Runner
	// Host answers what Run needs to know about the namespace; nil asks the
	// kernel and reads /etc/resolv.conf.
	Host Host
	// NFTables programs native nftables; nil does it over netlink.
	NFTables NFTables
	// Routing sets up TPROXY routing and ::6; nil does it over netlink.
	Routing Routing
	// Out receives dry-run output; nil is stdout.
	Out io.Writer
}

// Host is what Run reads about the namespace it programs, in that namespace.
type Host interface {
	// Facts tells which legacy tables exist and which binaries are installed.
	ipt.Facts
	// NFTablesInUse reports whether nf_tables may hold a table of the
	// family, anybody's; false means certainly none, so iptables-nft-save
	// has nothing to print.
	NFTablesInUse(f ipt.Family) bool
	// InterfaceAddrs lists the namespace's interface addresses in the
	// kernel's order (PodIPv6 decides on IPv6 from them).
	InterfaceAddrs() ([]netip.Addr, error)
	// Nameservers returns the IPv4 and IPv6 nameservers of resolv.conf.
	Nameservers() (v4, v6 []netip.Addr, err error)
}

// NFTables is the kernel side of the native nftables backend: pkg/nftables
// over netlink in the calling thread's namespace.
type NFTables interface {
	// Apply makes the kernel hold exactly p in our tables (see nftables.Apply).
	Apply(p *nftables.Program, force bool) (nftables.Result, error)
	// InSync reports whether the kernel holds exactly p.
	InSync(p *nftables.Program) (bool, error)
	// Present returns the names of our tables the kernel holds.
	Present() ([]string, error)
	// Cleanup deletes our tables and returns those it deleted.
	Cleanup() ([]string, error)
}

// Routing is what both backends need besides rules: TPROXY policy routing
// and Envoy's IPv6 passthrough source ::6 on lo.
type Routing interface {
	// Setup adds ::6 when p programs IPv6, and in TPROXY mode installs the
	// fwmark rule and local route of each family p programs; in REDIRECT
	// mode it removes them. It is idempotent.
	Setup(p *Policy) error
	// Remove deletes the TPROXY rule and route of both families, and ::6.
	Remove(p *Policy) error
}

func (e Env) runner(m ipt.Mode) ipt.Runner {
	if e.Runner != nil {
		return e.Runner(m)
	}
	return &ipt.Exec{Mode: m}
}

func (e Env) host() Host {
	if e.Host != nil {
		return e.Host
	}
	return SystemHost{}
}

func (e Env) nftables() NFTables {
	if e.NFTables != nil {
		return e.NFTables
	}
	return netlinkNFTables{}
}

func (e Env) routing() Routing {
	if e.Routing != nil {
		return e.Routing
	}
	return netlinkRouting{}
}

func (e Env) out() io.Writer {
	if e.Out != nil {
		return e.Out
	}
	return os.Stdout
}

// backend is one way of programming a policy's rules into the kernel:
// iptables-restore with the legacy or nft binaries, or native nftables over
// netlink. Apply and cleanup come in pairs, and running either twice
// changes nothing.
type backend interface {
	// name is how logs and errors call the backend.
	name() string
	// apply converges the namespace to p's rules (all of them again with
	// force); with dryRun it prints what it would do instead.
	apply(ctx context.Context, p *Policy, force, dryRun bool) error
	// cleanup removes every rule, chain or table of ours; with dryRun it
	// prints what it would do instead.
	cleanup(ctx context.Context, dryRun bool) error
	// drift lists what differs between the namespace and p's rules.
	drift(ctx context.Context, p *Policy) ([]string, error)
}

// backends picks, once per run, the backend o asks for, and the backends
// whose rules it replaces: those are removed after applying it, so that
// rules of an earlier run with the other backend do not capture twice.
func (e Env) backends(ctx context.Context, o *Options, log *slog.Logger) (backend, []backend, error) {
	nft := &nftBackend{k: e.nftables(), out: e.out(), log: log.With("backend", "nftables")}
	if o.NativeNFTables {
		return nft, nil, nil
	}
	h := e.host()
	m := o.Backend
	if m == ipt.Plain {
		var err error
		if m, err = ipt.DetectWith(ctx, h, e.runner(ipt.Legacy)); err != nil {
			return nil, nil, fmt.Errorf("detect iptables backend: %w", err)
		}
	}
	ipb := &iptBackend{
		mode: m, detected: o.Backend == ipt.Plain, runner: e.runner, host: h,
		out: e.out(), log: log,
	}
	return ipb, []backend{nft}, nil
}

// Run applies cfg to the network namespace it names (or the current one):
// it converges the rules of each family in one iptables-restore transaction,
// or with NativeNFTables all of them in one nftables netlink batch (nothing
// is written when they already match), sets up TPROXY routing, and runs the
// validation probe when asked. With CleanupOnly it removes everything
// istio-iptables owns instead; with DryRun it prints the transactions and
// changes nothing.
func Run(ctx context.Context, cfg *Config, log *slog.Logger, env Env) error {
	return netns.Do(cfg.NetworkNamespace, func() error {
		return runPolicy(ctx, cfg.Policy, cfg.Options, log, env)
	})
}

// runPolicy is Run in the namespace it entered.
func runPolicy(ctx context.Context, p Policy, o Options, log *slog.Logger, env Env) error {
	if !o.SkipRuleApply {
		var err error
		if o.CleanupOnly {
			err = cleanup(ctx, &p, &o, log, env)
		} else {
			err = apply(ctx, &p, &o, log, env)
		}
		if err != nil {
			return err
		}
	}
	if o.RunValidation && !o.DryRun {
		if err := Probe(ctx, &p, o.ProbePort, o.ProbeTimeout); err != nil {
			return err
		}
		log.Info("validation passed", "probe_port", o.ProbePort)
	}
	return nil
}

// apply resolves p in the namespace, converges the chosen backend to it,
// removes what the backends it replaces left, then sets up routing.
func apply(ctx context.Context, p *Policy, o *Options, log *slog.Logger, env Env) error {
	b, replaced, err := env.backends(ctx, o, log)
	if err != nil {
		return err
	}
	resolved, err := Resolve(*p, env.host())
	if err != nil {
		return err
	}
	if err := b.apply(ctx, &resolved, o.ForceApply, o.DryRun); err != nil {
		return err
	}
	if o.DryRun {
		return nil
	}
	for _, r := range replaced {
		// A backend whose rules cannot be read (no nf_tables in this
		// kernel, say) holds none of an earlier run.
		if err := r.cleanup(ctx, false); err != nil && !errors.Is(err, errUnreadable) {
			return fmt.Errorf("remove %s rules of an earlier run: %w", r.name(), err)
		}
	}
	return env.routing().Setup(&resolved)
}

// cleanup removes everything istio-iptables owns: the chosen backend's
// rules first, then those of the backends it replaces, the TPROXY routing
// and ::6.
func cleanup(ctx context.Context, p *Policy, o *Options, log *slog.Logger, env Env) error {
	b, replaced, err := env.backends(ctx, o, log)
	if err != nil {
		return err
	}
	if err := b.cleanup(ctx, o.DryRun); err != nil {
		return err
	}
	if o.DryRun {
		return nil
	}
	var errs []error
	for _, r := range replaced {
		errs = append(errs, r.cleanup(ctx, false))
	}
	return errors.Join(append(errs, env.routing().Remove(p))...)
}

// Resolve returns p completed with what it takes from the namespace: the
// resolv.conf nameservers to capture DNS for (unless p names them or
// captures all DNS), and whether IPv6 is programmed. p is not changed.
func Resolve(p Policy, h Host) (Policy, error) {
	if p.RedirectDNS && !p.CaptureAllDNS && len(p.DNSServersV4)+len(p.DNSServersV6) == 0 {
		v4, v6, err := h.Nameservers()
		if err != nil {
			return Policy{}, err
		}
		p.DNSServersV4, p.DNSServersV6 = v4, v6
	}
	if !p.EnableIPv6 {
		addrs, err := h.InterfaceAddrs()
		if err != nil {
			return Policy{}, err
		}
		p.EnableIPv6 = PodIPv6(addrs, p.DualStack)
	}
	return p, nil
}

// Check reports what is missing or extra in the namespace cfg names
// compared with the rules its policy calls for, with the backend its
// options choose (empty when they are intact). It changes nothing. It is
// the zero Env's Check: the real binaries and kernel.
func Check(ctx context.Context, cfg *Config) ([]string, error) {
	return Env{}.Check(ctx, cfg)
}

// Check is the package's Check reading the namespace through e.
func (e Env) Check(ctx context.Context, cfg *Config) ([]string, error) {
	var drift []string
	err := netns.Do(cfg.NetworkNamespace, func() error {
		b, _, err := e.backends(ctx, &cfg.Options, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		p, err := Resolve(cfg.Policy, e.host())
		if err != nil {
			return err
		}
		drift, err = b.drift(ctx, &p)
		return err
	})
	return drift, err
}

// SystemHost is the Host of the calling thread's namespace: /proc, netlink
// and the PATH, and the resolv.conf at ResolvConf ("" is /etc/resolv.conf).
type SystemHost struct {
	ResolvConf string
}

var _ Host = SystemHost{}

// LegacyTables reads /proc (see iptables.System).
func (SystemHost) LegacyTables(f ipt.Family) bool { return ipt.System{}.LegacyTables(f) }

// Installed looks the mode's binaries up on the PATH.
func (SystemHost) Installed(m ipt.Mode) bool { return ipt.System{}.Installed(m) }

// NFTablesInUse asks nf_tables over netlink; true when it cannot tell.
func (SystemHost) NFTablesInUse(f ipt.Family) bool {
	used, err := nftables.FamilyInUse(nftables.Options{}, f == ipt.IPv6)
	return err != nil || used
}

// InterfaceAddrs lists the namespace's addresses (see the package's InterfaceAddrs).
func (SystemHost) InterfaceAddrs() ([]netip.Addr, error) { return InterfaceAddrs() }

// Nameservers reads the resolv.conf file.
func (h SystemHost) Nameservers() (v4, v6 []netip.Addr, err error) {
	path := h.ResolvConf
	if path == "" {
		path = "/etc/resolv.conf"
	}
	return Nameservers(path)
}

// netlinkNFTables is the NFTables of the calling thread's namespace.
type netlinkNFTables struct{}

var _ NFTables = netlinkNFTables{}

func (netlinkNFTables) Apply(p *nftables.Program, force bool) (nftables.Result, error) {
	return nftables.Apply(p, nftables.Options{Force: force})
}

func (netlinkNFTables) InSync(p *nftables.Program) (bool, error) {
	return nftables.InSync(p, nftables.Options{})
}

func (netlinkNFTables) Present() ([]string, error) { return nftables.Present(nftables.Options{}) }

func (netlinkNFTables) Cleanup() ([]string, error) { return nftables.Cleanup(nftables.Options{}) }
