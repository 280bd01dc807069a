// Package istiod is Skiff's lean istiod: it reads services and Istio
// configuration from a directory of YAML files or from Kubernetes, turns
// every debounced change into an immutable push context, and serves xDS
// (state of the world and delta ADS) on 15010, metrics and readiness on
// 15014 and debug endpoints on 8080.
//
// Other components join through Options: WithGRPC registers services (the
// CA) on every gRPC server istiod runs, and WithSecureGRPC adds the TLS
// server (15012) with a TLS configuration. Both servers are pkg/grpcserver's
// (NewGRPCServer).
package istiod
