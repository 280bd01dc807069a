// Package ha tests istiod run as several replicas against a real
// kube-apiserver: one replica per Lease runs each singleton (root
// certificate ConfigMaps, webhook configuration patching), a survivor takes
// over when the leader is killed, proxyless clients reconnect to a survivor
// keeping their configuration meanwhile, and nothing is rewritten in a loop.
// It has only tests.
package ha
