// Package interop tests Skiff against Istio 1.31 itself: Istio's own
// binaries (pilot-agent, pilot-discovery, istioctl; pkg/cni runs istio-cni), built once per machine
// from Istio's published Go module by pkg/istiobin, run next to Skiff's on
// the same inputs. Rules installed by both istio-iptables must leave the
// same kernel state; Istio's istioctl must read Skiff's istiod; each
// pilot-agent must work under the other's control plane.
package interop
