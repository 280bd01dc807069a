package install

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/cni/repair"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestParseFlagsDefaults: with no flags and no environment, the entry is
// byte for byte the one install-cni wrote when it built it as a map.
func TestParseFlagsDefaults(t *testing.T) {
	f, err := ParseFlags(nil, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Flags{
		Config: Config{
			NetDir: "/host/etc/cni/net.d", BinDir: "/host/opt/cni/bin", AgentRunDir: "/var/run/istio-cni",
			PluginSource: "/opt/cni/bin/istio-cni", TokenPath: "/var/run/secrets/kubernetes.io/serviceaccount/token",
			CAPath: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", KubePort: 443, KubeconfigMode: 0o600,
		},
		HealthAddr: ":8000", MetricsAddr: ":15014", Repair: repair.DefaultConfig(),
	}
	entry := f.Config.Entry
	f.Config.Entry = want.Config.Entry
	if diff := cmp.Diff(want, f, cmp.AllowUnexported(f.Config.Entry)); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]any{
		"type": PluginType, "plugin_log_level": "info", "cni_agent_run_dir": "/var/run/istio-cni",
		"exclude_namespaces": []string{"kube-system"}, "pod_namespace": "istio-system", "native_nftables": false,
	})
	if string(b) != string(old) {
		t.Errorf("entry\n got %s\nwant %s", b, old)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  func(string) (string, bool)
		want func(*Flags) any
		is   any
	}{
		{"env", nil, env("MOUNTED_CNI_NET_DIR", "/n", "KUBERNETES_SERVICE_HOST", "10.0.0.1", "KUBERNETES_SERVICE_PORT", "6443"),
			func(f *Flags) any { return []any{f.Config.NetDir, f.Config.KubeHost, f.Config.KubePort} }, []any{"/n", "10.0.0.1", uint16(6443)}},
		{"flag beats env", []string{"--mounted-cni-net-dir", "/flag"}, env("MOUNTED_CNI_NET_DIR", "/env"),
			func(f *Flags) any { return f.Config.NetDir }, "/flag"},
		{"CNI_LOOKUP_BINARY", nil, env("CNI_LOOKUP_BINARY", "/bin/lookup"), func(f *Flags) any { return f.Config.LookupSource }, "/bin/lookup"},
		{"NATIVE_NFTABLES=1", nil, env("NATIVE_NFTABLES", "1"), func(f *Flags) any { return f.Config.Entry.NativeNFTables }, true},
		{"NATIVE_NFTABLES=True", nil, env("NATIVE_NFTABLES", "True"), func(f *Flags) any { return f.Config.Entry.NativeNFTables }, true},
		{"NATIVE_NFTABLES empty", nil, env("NATIVE_NFTABLES", ""), func(f *Flags) any { return f.Config.Entry.NativeNFTables }, false},
		{"--native-nftables=t", []string{"--native-nftables=t"}, env(), func(f *Flags) any { return f.Config.Entry.NativeNFTables }, true},
		{"--native-nftables=false over env", []string{"--native-nftables=false"}, env("NATIVE_NFTABLES", "true"),
			func(f *Flags) any { return f.Config.Entry.NativeNFTables }, false},
		{"exclude list", []string{"--exclude-namespaces", " kube-system, ,istio-system "}, env(),
			func(f *Flags) any { return f.Config.Entry.ExcludeNamespaces }, []string{"kube-system", "istio-system"}},
		{"no excluded namespaces", nil, env("EXCLUDE_NAMESPACES", ""),
			func(f *Flags) any { return f.Config.Entry.ExcludeNamespaces }, []string(nil)},
		{"entry", []string{"--cni-agent-run-dir", "/run/x", "--log-level", "debug"}, env("POD_NAMESPACE", "mesh"),
			func(f *Flags) any {
				e := f.Config.Entry
				return []string{e.Type, e.AgentRunDir, e.LogLevel, e.PodNamespace}
			}, []string{"istio-cni", "/run/x", "debug", "mesh"}},
		{"repair, Istio's chart variables", nil, env("REPAIR_ENABLED", "true", "REPAIR_DELETE_PODS", "false", "REPAIR_LABEL_PODS", "true",
			"REPAIR_REPAIR_PODS", "true", "REPAIR_BROKEN_POD_LABEL_KEY", "example.com/broken", "REPAIR_BROKEN_POD_LABEL_VALUE", "yes",
			"REPAIR_NODE_NAME", "node-1", "REPAIR_INIT_CONTAINER_NAME", "check", "REPAIR_INIT_CONTAINER_EXIT_CODE", "3",
			"REPAIR_INIT_CONTAINER_TERMINATION_MESSAGE", "no capture", "REPAIR_SIDECAR_ANNOTATION", "",
			"REPAIR_LABEL_SELECTORS", "app=x", "REPAIR_FIELD_SELECTORS", "status.phase=Pending"),
			func(f *Flags) any { return f.Repair }, repair.Config{
				Enabled: true, NodeName: "node-1", LabelPods: true, RepairPods: true, LabelKey: "example.com/broken", LabelValue: "yes",
				InitContainerName: "check", InitTerminationMsg: "no capture", InitExitCode: 3,
				LabelSelector: "app=x", FieldSelector: "status.phase=Pending",
			}},
		{"repair node from NODE_NAME", nil, env("NODE_NAME", "n2"), func(f *Flags) any { return f.Repair.NodeName }, "n2"},
		{"repair flags beat env", []string{"--repair-enabled=false", "--repair-delete-pods", "--repair-node-name=a", "--repair-init-container-exit-code=0"},
			env("REPAIR_ENABLED", "true", "REPAIR_NODE_NAME", "b"),
			func(f *Flags) any {
				return []any{f.Repair.Enabled, f.Repair.DeletePods, f.Repair.NodeName, f.Repair.InitExitCode}
			},
			[]any{false, true, "a", int32(0)}},
		{"the plugin's kubeconfig, Istio's variables", nil, env("KUBECONFIG_MODE", "0640", "KUBE_CA_FILE", "/etc/ca.pem", "SKIP_TLS_VERIFY", "true"),
			func(f *Flags) any { return []any{f.Config.KubeconfigMode, f.Config.KubeCAFile, f.Config.SkipTLSVerify} },
			[]any{os.FileMode(0o640), "/etc/ca.pem", true}},
		{"kubeconfig mode as a flag", []string{"--kubeconfig-mode=0o644"}, env("KUBECONFIG_MODE", "384"),
			func(f *Flags) any { return f.Config.KubeconfigMode }, os.FileMode(0o644)},
		{"MONITORING_PORT", nil, env("MONITORING_PORT", "9090"), func(f *Flags) any { return f.MetricsAddr }, ":9090"},
		{"--monitoring-port", []string{"--monitoring-port=9091"}, env(), func(f *Flags) any { return f.MetricsAddr }, ":9091"},
		{"METRICS_ADDR over MONITORING_PORT", nil, env("MONITORING_PORT", "9090", "METRICS_ADDR", "127.0.0.1:9999"),
			func(f *Flags) any { return f.MetricsAddr }, "127.0.0.1:9999"},
		{"Istio's flags without effect, logged", []string{"--ambient-enabled", "--cni-conf-name=10-calico.conflist"}, env("CHAINED_CNI_PLUGIN", "false"),
			func(f *Flags) any { return len(f.Unapplied) },
			3},
		{"chained, as Istio's default", nil, env("CHAINED_CNI_PLUGIN", "true"), func(f *Flags) any { return len(f.Unapplied) }, 0},
		{"servers off", []string{"--health-addr=", "--metrics-addr="}, env(),
			func(f *Flags) any { return f.HealthAddr + f.MetricsAddr }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFlags(tt.args, tt.env, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.is, tt.want(&f)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  func(string) (string, bool)
		want string
	}{
		{nil, env("NATIVE_NFTABLES", "yes"), `NATIVE_NFTABLES="yes": want true or false`},
		{nil, env("KUBERNETES_SERVICE_PORT", "https"), `KUBERNETES_SERVICE_PORT="https": want a port number`},
		{nil, env("KUBERNETES_SERVICE_PORT", "70000"), `KUBERNETES_SERVICE_PORT="70000"`},
		{[]string{"--native-nftables=yes"}, env(), `"yes"`},
		{[]string{"--kube-port", "0x"}, env(), "kube-port"},
		{[]string{"--log-level", "loud"}, env(), `--log-level "loud"`},
		{nil, env("LOG_LEVEL", "loud"), `LOG_LEVEL="loud": want debug`},
		{[]string{"--health-addr", "8000"}, env(), `--health-addr "8000": want host:port`},
		{nil, env("METRICS_ADDR", "15014"), `METRICS_ADDR="15014": want host:port`},
		{nil, env("KUBECONFIG_MODE", "rw"), `KUBECONFIG_MODE="rw": want a number`},
		{nil, env("KUBECONFIG_MODE", "01777"), `KUBECONFIG_MODE="01777": want a file mode`},
		{nil, env("MONITORING_PORT", "http"), `MONITORING_PORT="http": want a port number`},
		{nil, env("SKIP_TLS_VERIFY", "maybe"), `SKIP_TLS_VERIFY="maybe"`},
		{nil, env("REPAIR_DELETE_PODS", "sure"), `REPAIR_DELETE_PODS="sure": want true or false`},
		{nil, env("REPAIR_INIT_CONTAINER_EXIT_CODE", "300"), `REPAIR_INIT_CONTAINER_EXIT_CODE="300": want an exit code`},
		{[]string{"--repair-init-container-exit-code=-1"}, env(), `--repair-init-container-exit-code "-1": want an exit code`},
		{nil, env("REPAIR_LABEL_SELECTORS", "a in ("), `REPAIR_LABEL_SELECTORS="a in ("`},
		{nil, env("REPAIR_LABEL_PODS", "1", "REPAIR_BROKEN_POD_LABEL_KEY", "bad key"), `REPAIR_BROKEN_POD_LABEL_KEY="bad key"`},
		{[]string{"extra"}, env(), `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, env(), "no-such-flag"},
	} {
		_, err := ParseFlags(tt.args, tt.env, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFlags(%q): error %v, want it to mention %q", tt.args, err, tt.want)
		}
	}
	if _, err := ParseFlags([]string{"-h"}, env(), io.Discard); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("-h: %v, want pflag.ErrHelp", err)
	}
}
