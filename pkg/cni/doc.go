// Package cni is Skiff's chained CNI plugin: it reads Istio's CNI plugin
// configuration, looks the pod up in the Kubernetes API, decides from its
// containers, labels and annotations whether its traffic is captured, and
// programs the pod's network namespace with the same capture code as
// istio-iptables (pkg/capture).
package cni
