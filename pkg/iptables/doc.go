// Package iptables models netfilter rules as typed data, renders them in the
// canonical form iptables-save prints, parses that form back, plans atomic
// iptables-restore transactions that converge a network namespace to a desired
// rule set, and runs them with the legacy or nft iptables binaries.
package iptables
