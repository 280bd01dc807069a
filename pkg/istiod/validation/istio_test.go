package validation

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiobin"
)

// TestVerdictsAsIstio: every Istio object of the webhook's table is
// refused by Istio 1.31's own validation (its istioctl validate, offline)
// exactly when Skiff's webhook, as istiod configures it, refuses it.
func TestVerdictsAsIstio(t *testing.T) {
	istioctl := istiobin.Path(t, istiobin.Istioctl)
	v := &Validator{} // istiod's: no subset lookup (an unknown subset is an analysis warning, as in Istio)
	dir := t.TempDir()
	for i, tc := range webhookCases {
		if g := gvk(tc.doc).Group; g != NetworkingGroup && g != "security.istio.io" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(istioctl, "validate", "-f", file, "--kubeconfig", os.DevNull)
			cmd.Env = append(os.Environ(), "HOME="+dir)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			istioRefuses := err != nil
			skiffErr := validate(t, v, tc.doc)
			if istioRefuses != (skiffErr != nil) {
				t.Errorf("case %d: Istio refuses: %t (%s); Skiff refuses: %t (%v)", i, istioRefuses, strings.TrimSpace(string(out)), skiffErr != nil, skiffErr)
			}
		})
	}
}
