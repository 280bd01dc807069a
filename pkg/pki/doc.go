// Package pki holds the key, certificate-request and certificate code shared
// by the certificate authority in istiod and the SDS server in pilot-agent:
// generating keys (ECDSA P-256 by default, RSA 2048), creating CSRs for a
// workload identity, parsing and validating CSRs (signature checked, key type
// and signature algorithm allowed, subject alternative names extracted),
// issuing root, intermediate and leaf certificates, PEM encoding of keys and
// chains, and bundles of trusted roots (several during a root rotation).
//
// Errors caused by bad input (malformed PEM, a CSR whose signature does not
// verify, a key type that is not allowed) wrap ErrInvalid so that callers can
// tell them from internal failures.
package pki
