package iptables

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Runner reads and writes one network namespace's rules. Implementations run
// in the namespace of the calling OS thread.
type Runner interface {
	// Save returns what iptables-save prints for the family.
	Save(ctx context.Context, f Family) (string, error)
	// Restore applies an iptables-restore --noflush transaction for the family.
	Restore(ctx context.Context, f Family, text string) error
}

// Mode is the iptables flavour: the legacy xtables kernel interface, or
// nf_tables through the iptables-nft compatibility layer.
type Mode string

// The modes. Plain uses whatever "iptables" resolves to on the PATH.
const (
	Legacy Mode = "legacy"
	NFT    Mode = "nft"
	Plain  Mode = ""
)

// ParseMode reads the value of --force-iptables-binary.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Legacy, NFT:
		return Mode(s), nil
	}
	return "", fmt.Errorf("want %q or %q", Legacy, NFT)
}

// Exec is the Runner that runs the iptables-save and iptables-restore binaries.
type Exec struct {
	Mode Mode
	// Wait is how long legacy writes wait for the xtables lock, in seconds.
	Wait int
	// Spawned counts the child processes started, for benchmarks and logs.
	Spawned int
}

var _ Runner = (*Exec)(nil)

func (e *Exec) binary(f Family, verb string) string {
	name := "iptables"
	if f == IPv6 {
		name = "ip6tables"
	}
	if e.Mode != Plain {
		name += "-" + string(e.Mode)
	}
	return name + "-" + verb
}

// Save runs iptables-save (or its legacy, nft or IPv6 twin).
func (e *Exec) Save(ctx context.Context, f Family) (string, error) {
	return e.run(ctx, e.binary(f, "save"), nil)
}

// Restore runs iptables-restore --noflush with text on stdin. Legacy writes
// wait for the xtables lock; nft writes need no lock.
func (e *Exec) Restore(ctx context.Context, f Family, text string) error {
	wait, err := e.StartRestore(ctx, f, text)
	if err != nil {
		return err
	}
	return wait()
}

// Starter is a Runner that can start a restore and wait for it later, so
// that the two families' transactions run at once. The process starts in
// the namespace of the thread that calls StartRestore; wait may be called
// from any goroutine.
type Starter interface {
	StartRestore(ctx context.Context, f Family, text string) (wait func() error, err error)
}

var _ Starter = (*Exec)(nil)

// StartRestore starts Restore's iptables-restore and returns its wait.
func (e *Exec) StartRestore(ctx context.Context, f Family, text string) (func() error, error) {
	args := []string{"--noflush"}
	if e.Mode != NFT {
		wait := e.Wait
		if wait <= 0 {
			wait = 30
		}
		args = append(args, fmt.Sprintf("--wait=%d", wait))
	}
	wait, err := e.start(ctx, e.binary(f, "restore"), strings.NewReader(text), args...)
	if err != nil {
		return nil, err
	}
	return func() error { _, err := wait(); return err }, nil
}

func (e *Exec) run(ctx context.Context, bin string, stdin *strings.Reader, args ...string) (string, error) {
	wait, err := e.start(ctx, bin, stdin, args...)
	if err != nil {
		return "", err
	}
	return wait()
}

// start starts bin and returns what waits for it and reads its output.
func (e *Exec) start(ctx context.Context, bin string, stdin *strings.Reader, args ...string) (func() (string, error), error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	e.Spawned++
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	return func() (string, error) {
		if err := cmd.Wait(); err != nil {
			return "", fmt.Errorf("%s: %w: %s", bin, err, strings.TrimSpace(errb.String()))
		}
		return out.String(), nil
	}, nil
}

// Facts is what Detect reads about a namespace and the node without
// running a process.
type Facts interface {
	// LegacyTables reports whether any legacy xtables table of the family,
	// even an empty one, exists in the calling thread's namespace.
	LegacyTables(f Family) bool
	// Installed reports whether the binaries of the mode are on the PATH.
	Installed(m Mode) bool
}

// System is the Facts of the calling thread's namespace (read from /proc,
// with no side effects) and of the PATH.
type System struct{}

var _ Facts = System{}

// LegacyTables reads /proc/thread-self/net/ip{,6}_tables_names.
func (System) LegacyTables(f Family) bool {
	names := "/proc/thread-self/net/ip_tables_names"
	if f == IPv6 {
		names = "/proc/thread-self/net/ip6_tables_names"
	}
	b, err := os.ReadFile(names)
	return err == nil && len(bytes.TrimSpace(b)) > 0
}

// Installed looks up the mode's iptables-save and iptables-restore.
func (System) Installed(m Mode) bool {
	e := Exec{Mode: m}
	for _, verb := range []string{"save", "restore"} {
		if _, err := exec.LookPath(e.binary(IPv4, verb)); err != nil {
			return false
		}
	}
	return true
}

// Detect picks the mode for the calling thread's network namespace without
// changing it: legacy when legacy xtables already hold rules or chains there
// (so we join whoever programmed them), else nft when iptables-nft is
// installed, else plain iptables. Reading which legacy tables exist costs no
// process; iptables-legacy-save runs only when some exist. Istio's detection
// lists tables with the legacy binary, which instantiates an empty legacy nat
// table, so its next run sees "legacy in use" and duplicates every rule there.
func Detect(ctx context.Context) (Mode, error) {
	return DetectWith(ctx, System{}, &Exec{Mode: Legacy})
}

// DetectWith is Detect reading the namespace through facts and reading
// legacy rules, when legacy tables exist, with legacy.
func DetectWith(ctx context.Context, facts Facts, legacy Runner) (Mode, error) {
	for _, f := range []Family{IPv4, IPv6} {
		used, err := legacyInUse(ctx, facts, legacy, f)
		if err != nil {
			return "", err
		}
		if used {
			return Legacy, nil
		}
	}
	if facts.Installed(NFT) {
		return NFT, nil
	}
	return Plain, nil
}

func legacyInUse(ctx context.Context, facts Facts, legacy Runner, f Family) (bool, error) {
	if !facts.LegacyTables(f) || !facts.Installed(Legacy) {
		// No legacy table exists in this namespace (or legacy is not built
		// in), or nothing could have put rules there.
		return false, nil
	}
	out, err := legacy.Save(ctx, f)
	if err != nil {
		return false, err
	}
	st, err := ParseSave(out)
	if err != nil {
		return false, fmt.Errorf("read legacy rules: %w", err)
	}
	if st.RuleCount() > 0 {
		return true, nil
	}
	for name, t := range st.Tables {
		for _, c := range t.Chains {
			if !IsBuiltin(name, c) {
				return true, nil
			}
		}
	}
	return false, nil
}
