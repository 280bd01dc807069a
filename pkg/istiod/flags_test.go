package istiod_test

import (
	"io"
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
	for _, tt := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{[]string{}, env(), "want exactly one of --config-dir, --kubeconfig or in-cluster"},
		{[]string{"--config-dir", "x", "--kubeconfig", "y"}, env(), "got 2"},
		{[]string{"--config-dir", "x", "--grpcAddr", "15010"}, env(), `grpcAddr "15010"`},
		{[]string{"--config-dir", "x", "--debounce-after", "-1s"}, env(), "debounce-after -1s: must be positive"},
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
