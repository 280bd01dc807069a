package leader

import "testing"

func TestDeployment(t *testing.T) {
	for pod, want := range map[string]string{
		"istiod-678988468b-cb5v2":       "istiod",
		"istiod-canary-6b5c4d3e2-aaaaa": "istiod-canary",
		"istiod-ha-0":                   "istiod",
		"istiod":                        "",
		"unknown-laptop":                "",
		"-a-b":                          "",
		"istiod--x":                     "",
		"":                              "",
	} {
		if got := deployment(pod); got != want {
			t.Errorf("deployment(%q) = %q, want %q", pod, got, want)
		}
	}
}
