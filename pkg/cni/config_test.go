package cni

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/skiff-mesh/skiff/pkg/logflags"
)

func TestParseLogLevel(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want slog.Level
	}{
		{"", slog.LevelInfo}, {"debug", slog.LevelDebug}, {"INFO", slog.LevelInfo}, {" warn ", slog.LevelWarn},
		{"error", slog.LevelError}, {"fatal", slog.LevelError + 4}, {"none", logflags.LevelNone},
	} {
		got, err := ParseLogLevel(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	if _, err := ParseLogLevel("loud"); err == nil {
		t.Error(`ParseLogLevel("loud") succeeded`)
	}
}

func TestParseConfigLogLevel(t *testing.T) {
	for _, tt := range []struct{ conf, want string }{
		{`"plugin_log_level":"loud"`, `plugin_log_level: "loud"`},
		{`"log_level":"verbose"`, `log_level: "verbose"`},
	} {
		_, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"n","type":"istio-cni",` + tt.conf + `}`))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseConfig(%s): error %v, want it to mention %s", tt.conf, err, tt.want)
		}
	}
	c, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"n","type":"istio-cni","log_level":"debug"}`))
	if err != nil || c.level != slog.LevelDebug {
		t.Errorf("legacy log_level debug: level %v, %v", c.level, err)
	}
}

// TestMarshal: install-cni writes its entry by marshalling a Config, and the
// plugin reads it back unchanged.
func TestMarshal(t *testing.T) {
	c := Config{AgentRunDir: "/var/run/istio-cni", LogLevel: "info", ExcludeNamespaces: []string{"kube-system"}, PodNamespace: "istio-system"}
	c.Type = "istio-cni"
	want := `{"cni_agent_run_dir":"/var/run/istio-cni","exclude_namespaces":["kube-system"],"native_nftables":false,"plugin_log_level":"info","pod_namespace":"istio-system","type":"istio-cni"}`
	for name, v := range map[string]any{"value": c, "pointer": &c} {
		b, err := json.Marshal(v)
		if err != nil || string(b) != want {
			t.Errorf("Marshal(%s):\n got %s, %v\nwant %s", name, b, err, want)
		}
	}
	b, _ := json.Marshal(c)
	back, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	got := Config{AgentRunDir: back.AgentRunDir, LogLevel: back.LogLevel, ExcludeNamespaces: back.ExcludeNamespaces, PodNamespace: back.PodNamespace, NativeNFTables: back.NativeNFTables}
	got.Type = back.Type
	if diff := cmp.Diff(c, got, cmp.AllowUnexported(Config{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestVersionsIsACopy(t *testing.T) {
	v := Versions().SupportedVersions()
	v[0] = "9.9.9"
	if Versions().SupportedVersions()[0] == "9.9.9" {
		t.Error("Versions shares its slice with callers")
	}
}
