// Package capture is Skiff's traffic interception policy: a typed Config,
// bound from istio-iptables flags and environment variables (or built by the
// CNI plugin from pod annotations), and Build, a pure function from a Config
// to the rules that send a pod's traffic through its proxy. Run applies them
// to a network namespace with an iptables backend, with TPROXY policy routing
// and the validation probe.
package capture
