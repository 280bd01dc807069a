// Package gen turns a PushContext into xDS resources for one proxy: CDS,
// EDS, LDS and RDS for Envoy sidecars with Istio's resource names, the
// proxyless gRPC flavour (node metadata GENERATOR=grpc), and the NameTable
// (NDS). Resources are marshaled once and shared between proxies of the same
// scope through the push context's memo.
package gen
