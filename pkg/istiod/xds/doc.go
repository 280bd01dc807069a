// Package xds is istiod's ADS server: state-of-the-world and delta
// streams on one gRPC service, Istio's ACK/NACK/nonce rules, per-proxy push
// of generated resources in the order CDS, EDS, LDS, RDS, NDS, and the
// debouncer that turns bursts of changes into one push.
//
// Rules, as Istio applies them:
//   - a request whose nonce is not the last one sent for its type is stale
//     and ignored (delta: its subscription changes still apply);
//   - a request with error_detail is a NACK: it is recorded (syncz shows
//     ERROR) and the rejected config is not sent again; only a later change
//     of the config produces a new response;
//   - an EDS or RDS request with no names unsubscribes; CDS, LDS and NDS
//     are wildcard for Envoy sidecars (proxyless gRPC clients name what
//     they want for every type);
//   - a full push sends, in order, every subscribed type whose content
//     changed for that proxy; an endpoint-only change sends EDS for the
//     changed services only.
package xds
