package istioctl

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHoistRootFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantName string
		wantArgs []string
		wantErr  string
	}{
		{args: []string{"proxy-status"}, wantName: "proxy-status"},
		{args: []string{"proxy-status", "-c", "F"}, wantName: "proxy-status", wantArgs: []string{"-c", "F"}},
		{args: []string{"-c", "F", "proxy-status", "-r", "x"}, wantName: "proxy-status", wantArgs: []string{"-c", "F", "-r", "x"}},
		{args: []string{"--kubeconfig=F", "--context", "kind", "-i", "mesh", "-nshop", "proxy-config", "secret", "p"},
			wantName: "proxy-config", wantArgs: []string{"--kubeconfig=F", "--context", "kind", "-i", "mesh", "-nshop", "secret", "p"}},
		{args: []string{"--istioNamespace", "mesh", "proxy-config", "--", "secret"}, wantName: "proxy-config", wantArgs: []string{"--istioNamespace", "mesh", "--", "secret"}},
		{args: []string{"--revision", "x", "proxy-status"}, wantErr: "unknown flag --revision before the command"},
		{args: []string{"-c"}, wantErr: "flag -c needs a value"},
		{args: []string{"-c", "F"}, wantErr: "no command after -c F"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			name, args, err := hoistRootFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tc.wantName {
				t.Errorf("command %q, want %q", name, tc.wantName)
			}
			if d := cmp.Diff(tc.wantArgs, args); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
		})
	}
}
