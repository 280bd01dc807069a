// Package cni is Skiff's chained CNI plugin: it reads Istio's CNI plugin
// configuration, reads the pod from install-cni's cache of the node's pods
// (or, when the cache cannot answer, through its helper LookupBinary from
// the Kubernetes API; see package kubeapi), decides from its
// containers, labels and annotations whether its traffic is captured, and
// programs the pod's network namespace with the same capture code as
// istio-iptables (pkg/capture).
package cni
