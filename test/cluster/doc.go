// Package cluster is the flow of `make demo-cluster` and of the real-node
// tests: a kubenode cluster, Skiff's images imported into it, Istio's way of
// installing (helm install of base, istio-cni and istiod from
// manifests/charts), a labelled namespace with the demo mesh as
// Deployments, and the checks a user would make: injection, capture rules
// in a pod, SPIFFE identities, DNS through the agent, the traffic split over
// mTLS, istioctl proxy-status, and helm uninstall leaving nothing behind.
package cluster
