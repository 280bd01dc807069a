// Package nftables translates Skiff's typed iptables rulesets into Istio's
// native nftables layout and programs them over netlink, without the nft
// binary.
//
// The layout is one inet table per iptables table (istio-proxy-nat,
// istio-proxy-mangle, istio-proxy-raw), base chains named after the
// built-in chains they replace and hooked at the same hooks and priorities,
// and Istio's chains named in lower case with dashes (ISTIO_OUTPUT becomes
// istio-output). Because an inet table sees both families, a rule that the
// IPv4 and IPv6 rulesets share is installed once, and a rule of one family
// only is guarded by "meta nfproto" (implicitly, through an ip or ip6
// address match, or explicitly).
//
// Translate is pure and portable; it yields a Program that renders as the
// text "nft list ruleset" prints for it (String) or as an "nft -f" script
// that replaces the tables (Script). On Linux, Apply replaces all of our
// tables in one netlink transaction, and skips it when the kernel already
// holds exactly the program; Cleanup deletes our tables and nothing else.
package nftables
