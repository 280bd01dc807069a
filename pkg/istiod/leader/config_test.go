package leader_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
)

func TestConfigFromEnv(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    leader.Config
		wantErr string
	}{
		{"defaults", nil, leader.Config{Enabled: true, Namespace: "istio-system", Identity: "unknown-" + host, LeaseDuration: 30 * time.Second}, ""},
		{"the chart's environment", map[string]string{"POD_NAME": "istiod-7d9f-abcde", "POD_NAMESPACE": "mesh"},
			leader.Config{Enabled: true, Namespace: "mesh", Identity: "istiod-7d9f-abcde", LeaseDuration: 30 * time.Second}, ""},
		{"elections off", map[string]string{"ENABLE_LEADER_ELECTION": "false", "POD_NAME": "p"},
			leader.Config{Namespace: "istio-system", Identity: "p", LeaseDuration: 30 * time.Second}, ""},
		{"short lease", map[string]string{leader.LeaseDurationEnv: "4s", "POD_NAME": "p"},
			leader.Config{Enabled: true, Namespace: "istio-system", Identity: "p", LeaseDuration: 4 * time.Second}, ""},
		{"bad boolean", map[string]string{"ENABLE_LEADER_ELECTION": "maybe"}, leader.Config{}, `ENABLE_LEADER_ELECTION="maybe"`},
		{"bad duration", map[string]string{leader.LeaseDurationEnv: "soon"}, leader.Config{}, leader.LeaseDurationEnv + `="soon"`},
		{"too short", map[string]string{leader.LeaseDurationEnv: "1s"}, leader.Config{}, "at least 2s"},
		{"bad namespace", map[string]string{"POD_NAMESPACE": "Mesh_1"}, leader.Config{}, `POD_NAMESPACE="Mesh_1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := leader.ConfigFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, "istio-system")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if got.RenewDeadline() != got.LeaseDuration/2 || got.RetryPeriod() != got.LeaseDuration/4 {
				t.Errorf("renew %v retry %v: want half and a quarter of %v", got.RenewDeadline(), got.RetryPeriod(), got.LeaseDuration)
			}
		})
	}
}
