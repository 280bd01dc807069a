package istiod_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod"
)

func TestParseFlags(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	f, err := istiod.ParseFlags([]string{"discovery", "--config-dir", "x", "--debounce-after", "50ms"},
		env("PILOT_DEBOUNCE_MAX", "2s", "PILOT_ENABLE_EDS_DEBOUNCE", "false", "PILOT_PUSH_THROTTLE", "7"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := f.Config
	if c.ConfigDir != "x" || c.DebounceAfter != 50*time.Millisecond || c.DebounceMax != 2*time.Second || c.EDSDebounce || c.PushConcurrency != 7 || c.GRPCAddr != ":15010" {
		t.Fatalf("config %+v", c)
	}
	if c.XDSIdentityCheckOff {
		t.Error("the xDS identity check is off by default; Istio's is on")
	}
	if f, err := istiod.ParseFlags([]string{"--config-dir", "x"}, env("PILOT_ENABLE_XDS_IDENTITY_CHECK", "false"), io.Discard); err != nil || !f.Config.XDSIdentityCheckOff {
		t.Errorf("PILOT_ENABLE_XDS_IDENTITY_CHECK=false: check off %v, %v", f.Config.XDSIdentityCheckOff, err)
	}
	if c.KubeJSON {
		t.Error("Kubernetes clients default to JSON; Istio's default is protobuf")
	}
	if f, err := istiod.ParseFlags([]string{"--config-dir", "x"}, env("ISTIO_KUBE_CLIENT_CONTENT_TYPE", "json"), io.Discard); err != nil || !f.Config.KubeJSON {
		t.Errorf("ISTIO_KUBE_CLIENT_CONTENT_TYPE=json: KubeJSON %v, %v", f.Config.KubeJSON, err)
	}
	if c.KubeQPS != 80 || c.KubeBurst != 160 {
		t.Errorf("API server rate limits %v/%d, want Istio's defaults 80/160", c.KubeQPS, c.KubeBurst)
	}
	if f, err := istiod.ParseFlags([]string{"--config-dir", "x", "--kubernetesApiQPS", "500", "--kubernetesApiBurst=1000"}, env(), io.Discard); err != nil ||
		f.Config.KubeQPS != 500 || f.Config.KubeBurst != 1000 || slices.ContainsFunc(f.Unapplied, func(u string) bool { return strings.Contains(u, "kubernetesApi") }) {
		t.Errorf("--kubernetesApiQPS 500 --kubernetesApiBurst=1000: %v/%d, unapplied %q, %v", f.Config.KubeQPS, f.Config.KubeBurst, f.Unapplied, err)
	}
	for _, tt := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{[]string{}, env(), "want exactly one of --config-dir, --kubeconfig or in-cluster"},
		{[]string{"--config-dir", "x", "--kubeconfig", "y"}, env(), "got 2"},
		{[]string{"--config-dir", "x", "--grpcAddr", "15010"}, env(), `grpcAddr "15010"`},
		{[]string{"--config-dir", "x", "--debounce-after", "-1s"}, env(), "debounce-after -1s: must be positive"},
		{[]string{"--config-dir", "x", "--kubernetesApiQPS", "0"}, env(), "kubernetesApiQPS 0: must be positive"},
		{[]string{"--config-dir", "x"}, env("ISTIO_KUBE_CLIENT_CONTENT_TYPE", "yaml"), `ISTIO_KUBE_CLIENT_CONTENT_TYPE="yaml": want protobuf or json`},
		{[]string{"--config-dir", "x", "--kubernetesApiBurst", "-1"}, env(), "kubernetesApiBurst -1: must be positive"},
		{[]string{"--config-dir", "x"}, env("PILOT_DEBOUNCE_AFTER", "soon"), `PILOT_DEBOUNCE_AFTER="soon"`},
		{[]string{"--config-dir", "x"}, env("PILOT_PUSH_THROTTLE", "0"), `PILOT_PUSH_THROTTLE="0"`},
		{[]string{"--config-dir", "x", "--log-level", "loud"}, env(), `--log-level "loud"`},
		{[]string{"--config-dir", "x", "extra"}, env(), `unexpected argument "extra"`},
	} {
		_, err := istiod.ParseFlags(tt.args, tt.env, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFlags(%q): error %v, want it to mention %q", tt.args, err, tt.want)
		}
	}
}

// TestIstioChartArguments parses the arguments and environment Istio's
// istiod chart gives pilot-discovery.
func TestIstioChartArguments(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"discovery", "--monitoringAddr=:15014", "--log_output_level=default:warn", "--log_as_json",
		"--domain", "cluster.local", "--keepaliveMaxServerConnectionAge", "30m", "--cniNamespace=kube-system"}
	getenv := func(env map[string]string) func(string) string { return func(k string) string { return env[k] } }

	f, err := istiod.ParseFlags(args, getenv(map[string]string{"KUBECONFIG": kubeconfig}), io.Discard)
	if err != nil {
		t.Fatalf("Istio's chart arguments: %v", err)
	}
	if f.Config.Kubeconfig != kubeconfig || f.Config.InCluster {
		t.Errorf("KUBECONFIG with a file: kubeconfig %q in-cluster %v", f.Config.Kubeconfig, f.Config.InCluster)
	}
	if f.LogLevel != slog.LevelWarn || !f.LogJSON || f.Config.Keepalive.MaxConnectionAge != 30*time.Minute {
		t.Errorf("level %v json %v max age %v", f.LogLevel, f.LogJSON, f.Config.Keepalive.MaxConnectionAge)
	}
	if got := strings.Join(f.Unapplied, " "); got != "--cniNamespace=kube-system" {
		t.Errorf("Unapplied = %q", got)
	}

	// The chart's KUBECONFIG names a remote cluster's file that exists only
	// for an external control plane: without it, in-cluster credentials.
	f, err = istiod.ParseFlags(args, getenv(map[string]string{"KUBECONFIG": "/var/run/secrets/remote/config", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.Config.Kubeconfig != "" || !f.Config.InCluster {
		t.Errorf("KUBECONFIG without a file: kubeconfig %q in-cluster %v", f.Config.Kubeconfig, f.Config.InCluster)
	}

	if f.Config.Domain != "cluster.local" {
		t.Errorf("--domain cluster.local: Domain %q", f.Config.Domain)
	}
	for _, tt := range []struct{ arg, want string }{
		{"--log_output_level=default:loud", `--log_output_level "default:loud"`},
		{"--keepaliveMaxServerConnectionAge=soon", "keepaliveMaxServerConnectionAge"},
	} {
		_, err := istiod.ParseFlags([]string{"--config-dir", "x", tt.arg}, getenv(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to mention %q", tt.arg, err, tt.want)
		}
	}
}

// TestDomainFlag: --domain is applied (Config.Domain, never in Unapplied);
// a value that is no DNS name is an error naming it.
func TestDomainFlag(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: nil, want: "cluster.local"},
		{args: []string{"--domain=corp.example"}, want: "corp.example"},
		{args: []string{"--domain", "cluster.local"}, want: "cluster.local"},
		{args: []string{"--domain="}, wantErr: `--domain "": want the cluster's DNS domain`},
		{args: []string{"--domain=corp..example"}, wantErr: `domain "corp..example": label ""`},
		{args: []string{"--domain=corp_x.example"}, wantErr: `domain "corp_x.example": label "corp_x"`},
	} {
		f, err := istiod.ParseFlags(append([]string{"--config-dir", "x"}, tt.args...), func(string) string { return "" }, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want it to contain %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if f.Config.Domain != tt.want {
			t.Errorf("%q: Domain %q, want %q", tt.args, f.Config.Domain, tt.want)
		}
		if u := strings.Join(f.Unapplied, " "); strings.Contains(u, "domain") {
			t.Errorf("%q: Unapplied %q names --domain, which is applied", tt.args, u)
		}
	}
}
