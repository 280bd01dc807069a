// Package compat is the list of arguments and environment variables that
// Istio's own charts and injection templates (1.28 to 1.31) hand each
// binary, with what Skiff does with each: applied, or accepted and
// reported once as not applicable. It is the source of
// docs/compatibility.md, and binaries use it to name, once at start, the
// Istio variables they were given that change nothing.
package compat

import (
	"log/slog"
	"slices"
	"strings"
)

// Binary is a program Istio's manifests start.
type Binary string

// The binaries, by Istio's names.
const (
	PilotDiscovery Binary = "pilot-discovery" // istiod's container
	PilotAgent     Binary = "pilot-agent"     // istio-proxy's container
	IstioIptables  Binary = "istio-iptables"  // istio-init / istio-validation: pilot-agent istio-iptables
	InstallCNI     Binary = "install-cni"     // the istio-cni DaemonSet
	App            Binary = "app"             // set on the application's container, read by grpc-go
)

// Binaries lists them in the order the document uses.
var Binaries = []Binary{PilotDiscovery, PilotAgent, IstioIptables, InstallCNI, App}

// Use says what Skiff does with an argument or variable.
type Use int

const (
	// Applied: Skiff does what Istio does with it (or the Go runtime does).
	Applied Use = iota
	// Partly: applied with a limit the note states.
	Partly
	// Accepted: taken and ignored; a binary names it once in its log.
	Accepted
	// NotOurs: read by another program in the pod (the app, grpc-go).
	NotOurs
)

// String is the word the document uses.
func (u Use) String() string {
	return [...]string{"applied", "partly", "accepted, not applied", "not Skiff's"}[u]
}

// Entry is one argument ("--domain", "-p") or variable ("POD_NAME").
type Entry struct {
	Binary Binary
	// Name is the flag with its dashes, or the variable's name.
	Name string
	// Example is a value to parse the flag with in the tests; empty for a
	// boolean flag or a variable.
	Example string
	Use     Use
	// Note says what Skiff does with it.
	Note string
	// Istio names the Istio versions whose manifests pass it, when not all
	// of 1.28 to 1.31.
	Istio string
}

// IsFlag reports whether e is a command-line argument.
func (e Entry) IsFlag() bool { return strings.HasPrefix(e.Name, "-") }

// Unread returns the variables Istio's binary b registers that Skiff's
// does not read (accepted, not applied), sorted.
func Unread(b Binary) []string { return slices.Clone(unread[b]) }

// Entries returns the table, by binary then name.
func Entries() []Entry { return slices.Clone(table) }

// Lookup returns the entry for name of binary b.
func Lookup(b Binary, name string) (Entry, bool) {
	for _, e := range table {
		if e.Binary == b && e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// NotApplied returns the variables of environ ("K=V") that Istio's
// manifests hand b and Skiff accepts without acting on, sorted: what a
// binary logs once at start. Variables set to "" are left out.
func NotApplied(b Binary, environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		_, isUnread := slices.BinarySearch(unread[b], k)
		if e, found := Lookup(b, k); found && e.Use == Accepted || isUnread {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Report logs once, at start, what b was handed by Istio's manifests and
// does not act on: args are the arguments its parser reported as
// unapplied, and the variables come from environ. Nothing is logged when
// there are none.
func Report(log *slog.Logger, b Binary, args, environ []string) {
	vars := NotApplied(b, environ)
	if len(args) == 0 && len(vars) == 0 {
		return
	}
	log.Info("accepted Istio settings that do not apply to Skiff; see docs/compatibility.md", "binary", string(b), "args", args, "env", vars)
}
