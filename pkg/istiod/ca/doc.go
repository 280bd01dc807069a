// Package ca is istiod's certificate authority: it signs workload CSRs sent
// to istio.v1.auth.IstioCertificateService/CreateCertificate for exactly the
// SPIFFE identity the caller proves, and issues istiod's own serving
// certificate.
//
// Key material comes from one of three sources, checked in this order:
//
//   - a plug-in CA directory ("cacerts": ca-cert.pem, ca-key.pem,
//     root-cert.pem, cert-chain.pem), watched and re-read when it changes, so
//     the issuer switches without a restart;
//   - in Kubernetes mode, the istio-ca-secret Secret (same four keys), holding
//     a self-signed root generated on first start;
//   - in file mode, a directory holding the same four files, likewise
//     generated on first start.
//
// root-cert.pem may hold several roots: all of them are trusted and
// published (a root rotation keeps the old and the new root side by side).
// The bundle is published as a file and, in Kubernetes mode, as the
// istio-ca-root-cert ConfigMap in every namespace.
//
// Callers prove their identity through Authenticators: a Kubernetes
// service-account token checked with TokenReview, the caller's current
// workload certificate presented over mTLS, or, without an API server, a JWT
// shaped like a projected service-account token and signed by a configured key.
// A JWT that verified is remembered by its hash, so the same token sent with
// the next CSR costs no signature check; its times are checked at every call.
// TokenReview answers are not cached.
package ca
