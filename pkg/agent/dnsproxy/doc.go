// Package dnsproxy is the sidecar's DNS proxy: it listens on
// 127.0.0.1:15053 and [::1]:15053 (UDP and TCP), answers mesh names from the
// NameTable that istiod pushes, and forwards everything else to the
// nameservers of the pod's resolv.conf, with retries, failover and a cache.
//
// Mesh answers follow Istio's rules: the host name itself, for Kubernetes
// services the short forms (svc., svc.ns., svc.ns.svc., ...), wildcard hosts,
// a CNAME from name.<first search domain>. to name. so that a search-list
// walk costs one query per address family, TTL 30, and NOERROR with no
// answer for a known host that has no address of the asked family. Beyond
// Istio it answers SRV for mesh service ports and PTR for mesh addresses,
// keeps the client's EDNS0 buffer size when forwarding, sets TC for UDP
// clients whose buffer is too small, and caches upstream answers (positive
// and negative) for as long as their TTLs allow.
//
// Hot answers (mesh names and cache hits) are served from precomputed wire
// messages without unpacking the query; everything else is taken apart in
// full (parseRequest) and served by the same code. The package reads and
// writes the wire format itself. See README.md for the design.
package dnsproxy
