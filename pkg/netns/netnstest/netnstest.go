// Package netnstest makes throwaway network namespaces for privileged tests.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/netns"
)

// RequireRoot skips the test unless it runs as root. CI runs as root, so
// privileged tests always run there.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, iptables)")
	}
}

// NS is a named network namespace (visible to "ip netns") removed when the test ends.
type NS struct {
	Name string
	Path string
}

// UniqueName returns prefix followed by random hex, short enough for an interface name.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// New creates a namespace with loopback up and registers its removal
// (with everything in it: links, rules, routes) in t.Cleanup.
func New(t testing.TB) *NS {
	t.Helper()
	RequireRoot(t)
	ns := &NS{Name: UniqueName("skt-")}
	ns.Path = filepath.Join("/run/netns", ns.Name)
	Run(t, "ip", "netns", "add", ns.Name)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", ns.Name).Run()
		_ = os.RemoveAll(filepath.Join("/etc/netns", ns.Name))
	})
	ns.Exec(t, "ip", "link", "set", "lo", "up")
	return ns
}

// Do runs fn inside the namespace.
func (ns *NS) Do(t testing.TB, fn func() error) {
	t.Helper()
	if err := netns.Do(ns.Path, fn); err != nil {
		t.Fatal(err)
	}
}

// Exec runs a command inside the namespace and returns its output, failing the test on error.
func (ns *NS) Exec(t testing.TB, name string, args ...string) string {
	t.Helper()
	return Run(t, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// SetResolvConf gives commands run with Exec their own /etc/resolv.conf.
func (ns *NS) SetResolvConf(t testing.TB, content string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", ns.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Run runs a command and returns its combined output, failing the test on error.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Veth joins two namespaces with a veth pair, addresses both ends (CIDR
// notation, e.g. "10.9.0.1/24") and brings them up. It returns the interface
// names in a and b. The pair disappears with either namespace.
func Veth(t testing.TB, a, b *NS, addrA, addrB string) (string, string) {
	t.Helper()
	ifA, ifB := UniqueName("va"), UniqueName("vb")
	Run(t, "ip", "link", "add", ifA, "netns", a.Name, "type", "veth", "peer", "name", ifB, "netns", b.Name)
	a.Exec(t, "ip", "addr", "add", addrA, "dev", ifA)
	b.Exec(t, "ip", "addr", "add", addrB, "dev", ifB)
	a.Exec(t, "ip", "link", "set", ifA, "up")
	b.Exec(t, "ip", "link", "set", ifB, "up")
	return ifA, ifB
}
