// Package security tests istiod's security policy end to end: grpc-go's
// own xDS servers and clients, with workload certificates from a test CA,
// make real RPCs under PeerAuthentication and AuthorizationPolicy.
package security
