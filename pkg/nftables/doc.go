// Package nftables translates Skiff's typed iptables rulesets into Istio's
// native nftables layout and programs them over netlink, without the nft
// binary.
//
// The layout is one inet table per iptables table (istio-proxy-nat,
// istio-proxy-mangle, istio-proxy-raw), base chains named after the
// built-in chains they replace and hooked at the same hooks and priorities,
// and Istio's chains named in lower case with dashes (ISTIO_OUTPUT becomes
// istio-output). The kernel state is Istio 1.31's native mode for the same
// flags (test/interop compares them): Istio's chain order, match order and
// a counter on every rule. Because an inet table sees both families, a rule
// that the IPv4 and IPv6 rulesets share is installed once, the rules of one
// family go step by step with the other's, as Istio writes them, and only
// an ip or ip6 address match makes a rule one family's. With IPv6 off, a rule
// that matches no address is guarded by "meta nfproto ipv4" so that IPv6
// passes untouched, as it does with iptables (Istio's catch it too).
//
// Translate is pure and portable; it yields a Program that renders as the
// text "nft list ruleset" prints for it (String) or as an "nft -f" script
// that replaces the tables (Script). On Linux, Apply replaces all of our
// tables in one netlink transaction, and skips it when the kernel already
// holds exactly the program; Cleanup deletes our tables and nothing else.
package nftables
