package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/cni"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cni-plugin-test")
	if err != nil {
		panic(err)
	}
	// The plugin and its API-server helper, side by side as install-cni
	// installs them.
	bin = filepath.Join(dir, "istio-cni")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cni.LookupBinary), "../cni-lookup").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// invoke runs the plugin through its real contract: CNI_* env, config on stdin, result on stdout.
func invoke(t *testing.T, command, args, stdin string) (stdout, stderr string, exitCode int) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=c1", "CNI_NETNS=/run/netns/none",
		"CNI_IFNAME=eth0", "CNI_PATH=/usr/lib/cni", "CNI_ARGS=" + args}
	cmd.Stdin = strings.NewReader(stdin)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

const prev = `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/run/netns/none"}],"ips":[{"address":"10.88.0.5/16","gateway":"10.88.0.1","interface":0}]}`

func conf(version string, extra string) string {
	return `{"cniVersion":"` + version + `","name":"n","type":"istio-cni","cni_agent_run_dir":"/nonexistent"` + extra + `}`
}

func TestPassThroughWithoutPod(t *testing.T) {
	stdout, stderr, code := invoke(t, "ADD", "IgnoreUnknown=1", conf("1.0.0", `,"prevResult":`+prev))
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	var got, want map[string]any
	_ = json.Unmarshal([]byte(stdout), &got)
	_ = json.Unmarshal([]byte(prev), &want)
	if got["ips"] == nil || len(got["ips"].([]any)) != 1 {
		t.Errorf("prevResult not passed through: %s", stdout)
	}
}

func TestPassThroughOwnNodePod(t *testing.T) {
	// Its own pod is recognised before any kubeconfig is read (there is none here).
	_, stderr, code := invoke(t, "ADD", "IgnoreUnknown=1;K8S_POD_NAMESPACE=istio-system;K8S_POD_NAME=istio-cni-node-x7k2", conf("1.0.0", ""))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestExcludedNamespace(t *testing.T) {
	_, stderr, code := invoke(t, "ADD", "IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=dns", conf("1.0.0", `,"kubernetes":{"exclude_namespaces":["kube-system"]}`))
	if code != 0 {
		t.Fatalf("legacy exclude_namespaces: exit %d: %s", code, stderr)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, command, args, stdin string
		code                       float64
		msg                        string
	}{
		{"malformed json", "ADD", "", `{"cniVersion":`, 6, "network config"},
		{"unknown version", "ADD", "", conf("9.9.9", ""), 1, "9.9.9"},
		{"bad lookup interval", "ADD", "", conf("1.0.0", `,"pod_lookup_interval":"soon"`), 7, `pod_lookup_interval: "soon"`},
		{"bad backend", "ADD", "", conf("1.0.0", `,"iptables_backend":"xt"`), 7, `iptables_backend: "xt"`},
		{"bad log level", "ADD", "", conf("1.0.0", `,"plugin_log_level":"loud"`), 7, `plugin_log_level: "loud"`},
		{"log file not writable", "ADD", "", conf("1.0.0", `,"log_file":"/nonexistent/dir/cni.log"`), 5, "/nonexistent/dir/cni.log"},
		{"no kubeconfig", "ADD", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p", conf("1.0.0", ""), 7, "read kubeconfig"},
		{"status without kubeconfig", "STATUS", "", conf("1.1.0", ""), 50, "kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, code := invoke(t, tt.command, tt.args, tt.stdin)
			if code == 0 {
				t.Fatalf("exit 0, want an error: %s", stdout)
			}
			var e map[string]any
			if err := json.Unmarshal([]byte(stdout), &e); err != nil {
				t.Fatalf("stdout is not a CNI error: %q", stdout)
			}
			if e["code"] != tt.code || !strings.Contains(fmt.Sprint(e["msg"], " ", e["details"]), tt.msg) {
				t.Errorf("error %v, want code %v mentioning %q", e, tt.code, tt.msg)
			}
		})
	}
}

// TestWithoutHelper: a plugin installed without its helper fails the ADD of
// a pod the cache does not hold, naming the missing file.
func TestWithoutHelper(t *testing.T) {
	alone := filepath.Join(t.TempDir(), "istio-cni")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(alone)
	cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/run/netns/none", "CNI_IFNAME=eth0",
		"CNI_PATH=/usr/lib/cni", "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p"}
	cmd.Stdin = strings.NewReader(conf("1.0.0", ""))
	out, _ := cmd.Output()
	var e map[string]any
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("stdout is not a CNI error: %q", out)
	}
	if e["code"] != float64(11) || !strings.Contains(fmt.Sprint(e["details"]), cni.LookupBinary) {
		t.Errorf("error %v, want code 11 naming %s", e, cni.LookupBinary)
	}
}

func TestDelAlwaysSucceeds(t *testing.T) {
	if _, stderr, code := invoke(t, "DEL", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=gone", conf("1.0.0", "")); code != 0 {
		t.Errorf("DEL: exit %d: %s", code, stderr)
	}
}

// TestLean keeps grpc, Envoy's protos, client-go, the HTTP, TLS and YAML
// code of the API-server fallback (its helper's) and any crypto package
// (whose FIPS module has initialisers of its own) out of a binary that runs
// once per pod.
func TestLean(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"google.golang.org/grpc", "github.com/envoyproxy/", "k8s.io/client-go", "k8s.io/api/", "google.golang.org/protobuf",
			"net/http", "crypto/", "sigs.k8s.io/yaml", "go.yaml.in/"} {
			if dep == banned || strings.HasPrefix(dep, strings.TrimSuffix(banned, "/")+"/") {
				t.Errorf("cni-plugin links %s", dep)
			}
		}
	}
}
