package repair_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-mesh/skiff/pkg/cni/repair"
)

func TestBroken(t *testing.T) {
	withMsg := repair.DefaultConfig()
	withMsg.InitTerminationMsg = " no capture \n"
	anyCode := repair.DefaultConfig()
	anyCode.InitExitCode = 0
	for _, tt := range []struct {
		name string
		cfg  repair.Config
		pod  *corev1.Pod
		want bool
	}{
		{"crash loop after exit 126", repair.DefaultConfig(), pod("ns", "p", "n", crashLooping(126)), true},
		{"first run failed with 126", repair.DefaultConfig(), pod("ns", "p", "n", failedOnce(126, "")), true},
		{"other exit code", repair.DefaultConfig(), pod("ns", "p", "n", crashLooping(1)), false},
		{"other exit code, any code matches", anyCode, pod("ns", "p", "n", crashLooping(1)), true},
		{"passed after a failure", repair.DefaultConfig(), pod("ns", "p", "n", passed), false},
		{"no status yet", repair.DefaultConfig(), pod("ns", "p", "n"), false},
		{"no validation init container", repair.DefaultConfig(), pod("ns", "p", "n", noValidation), false},
		{"not injected", repair.DefaultConfig(), pod("ns", "p", "n", crashLooping(126), notInjected), false},
		{"message matches, spaces trimmed", withMsg, pod("ns", "p", "n", failedOnce(126, "no capture")), true},
		{"message differs", withMsg, pod("ns", "p", "n", failedOnce(126, "something else")), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Broken(tt.pod); got != tt.want {
				t.Errorf("Broken = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAction(t *testing.T) {
	for _, tt := range []struct {
		name                string
		del, label, inPlace bool
		want                repair.Action
	}{
		{"none", false, false, false, repair.None},
		{"delete", true, false, false, repair.Delete},
		{"label", false, true, false, repair.Label},
		{"delete wins over label", true, true, false, repair.Delete},
		{"in place alone deletes", false, false, true, repair.Delete},
		{"in place with label labels", false, true, true, repair.Label},
		{"in place with delete deletes", true, false, true, repair.Delete},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := repair.Config{DeletePods: tt.del, LabelPods: tt.label, RepairPods: tt.inPlace}
			if got := c.Action(); got != tt.want {
				t.Errorf("Action = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*repair.Config)
		want string // "" when valid
	}{
		{"defaults", func(*repair.Config) {}, ""},
		{"label selector", func(c *repair.Config) { c.LabelSelector = "app in (a,b)" }, ""},
		{"bad label selector", func(c *repair.Config) { c.LabelSelector = "app in (" }, `REPAIR_LABEL_SELECTORS="app in ("`},
		{"bad field selector", func(c *repair.Config) { c.FieldSelector = "a==b==c" }, `REPAIR_FIELD_SELECTORS="a==b==c"`},
		{"bad label key", func(c *repair.Config) { c.LabelPods, c.LabelKey = true, "not a key!" }, `REPAIR_BROKEN_POD_LABEL_KEY="not a key!"`},
		{"bad label value", func(c *repair.Config) { c.LabelPods, c.LabelValue = true, "a b" }, `REPAIR_BROKEN_POD_LABEL_VALUE="a b"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := repair.DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
