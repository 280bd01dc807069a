// Package capture is Skiff's traffic interception policy: a typed Policy
// (what to capture), bound with the Options that say how to apply it from
// istio-iptables flags and environment variables (or built by the CNI plugin
// from pod annotations), and Build, a pure function from a Policy to the
// rules that send a pod's traffic through its proxy. Run applies them to a
// network namespace with one backend (iptables-restore, with the legacy or
// nft binaries, or native nftables), with TPROXY policy routing and the
// validation probe; everything it reads or changes besides its arguments
// comes through an Env.
package capture
