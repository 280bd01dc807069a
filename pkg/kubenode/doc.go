// Package kubenode runs a real single-node Kubernetes cluster for tests and
// the cluster demo: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kube-proxy, CoreDNS and a kubelet driving Debian's
// containerd and runc, with Debian's bridge, host-local and portmap plugins
// as the node's network.
//
// The whole node lives in one private mount, network and UTS namespace held
// by a sleeping process: /run is a private tmpfs, /etc, /opt, /var/lib and
// /var/log are overlays whose upper layers sit in the node's directory, so
// nothing it writes lands outside that directory. Pods get a cgroup root of
// the node's own, so two nodes (a developer and CI) can run at once. Stop
// kills every process the node started, containers included, removes the
// cgroups and the directory; the namespaces go with the last process.
//
// The Kubernetes binaries are built once per machine by `make k8s-assets`
// (pkg/kubetest.AssetsDir); containerd, runc and the CNI plugins come from
// Debian (`make deps`). Images are imported from OCI image-layout tars
// (pkg/ociimage), so no registry is needed. The package is Linux only
// (namespaces, cgroups); elsewhere it is empty.
package kubenode
