package kubenode

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
)

// Addresses of the node's network; the node is a namespace of its own, so
// every node uses the same ones.
const (
	NodeIP      = "10.250.0.2"
	nodeCIDR    = NodeIP + "/24"
	nodeGateway = "10.250.0.1" // nothing answers there: a default route for the node
	PodCIDR     = "10.244.0.0/24"
	ServiceCIDR = "10.96.0.0/16"
	// APIServiceIP is the kubernetes Service's cluster IP.
	APIServiceIP = "10.96.0.1"
	apiPort      = 6443
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// SandboxImage is the pod sandbox image containerd runs (containerd
	// 1.6's default); it must be imported.
	SandboxImage = "registry.k8s.io/pause:3.6"
	// CNIBinDir and CNIConfDir are where containerd finds CNI plugins and
	// the node's network configuration (as on a kubeadm node).
	CNIBinDir  = "/opt/cni/bin"
	CNIConfDir = "/etc/cni/net.d"
	// ConflistName is the node's network configuration file in CNIConfDir.
	ConflistName = "10-bridge.conflist"
)

// files is what the node's configuration templates read.
type files struct {
	Dir, Name, NodeIP, PodCIDR, ServiceCIDR, ClusterDomain string
	CgroupRoot, SandboxImage, CNIBinDir, CNIConfDir        string
	APIPort                                                int
	PKI                                                    certFiles
	Hosts                                                  []HostEntry
}

// HostEntry is a name CoreDNS answers itself: the node's stand-in for a
// name outside the cluster (nothing leaves the node's namespace).
type HostEntry struct{ IP, Name string }

var configTemplates = template.Must(template.New("").Parse(`
{{define "containerd.toml"}}version = 2
root = "{{.Dir}}/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.SandboxImage}}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.CNIConfDir}}"
{{end}}
{{define "kubelet.yaml"}}apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{.NodeIP}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
cgroupDriver: cgroupfs
cgroupRoot: {{.CgroupRoot}}
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
clusterDNS: [{{.NodeIP}}]
clusterDomain: {{.ClusterDomain}}
resolvConf: {{.Dir}}/pod-resolv.conf
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: {{.PKI.CA}}}
authorization: {mode: Webhook}
evictionHard: {memory.available: 1Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
localStorageCapacityIsolation: false
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
{{end}}
{{define "kube-proxy.yaml"}}apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: {{.Dir}}/kubeconfig.admin}
hostnameOverride: {{.Name}}
mode: iptables
clusterCIDR: {{.PodCIDR}}
bindAddress: {{.NodeIP}}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables: {masqueradeAll: true}
conntrack: {maxPerCore: 0}
{{end}}
{{define "Corefile"}}.:53 {
    bind {{.NodeIP}}
    errors
    ready 127.0.0.1:8181
    kubernetes {{.ClusterDomain}} in-addr.arpa ip6.arpa {
        kubeconfig {{.Dir}}/kubeconfig.admin
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    hosts {{.Dir}}/external.hosts {
        fallthrough
    }
    cache 5
}
{{end}}
{{define "external.hosts"}}{{range .Hosts}}{{.IP}} {{.Name}}
{{end}}{{end}}
{{define "conflist"}}{
  "cniVersion": "1.0.0",
  "name": "skiff-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
{{end}}
{{define "pod-resolv.conf"}}nameserver {{.NodeIP}}
{{end}}
{{define "hosts"}}127.0.0.1 localhost
{{.NodeIP}} {{.Name}}
{{end}}`))

// render writes template name to path.
func (f *files) render(name, path string) error {
	var b bytes.Buffer
	if err := configTemplates.ExecuteTemplate(&b, name, f); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
