package istioctl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/version"
)

// TestVersion asks a real istiod, with a sidecar connected that reports
// Istio 1.31.0, for its version and its proxies'.
func TestVersion(t *testing.T) {
	debug := "http://" + startIstiod(t)
	code, out, errs := run(t, "", "version", "--istiod", debug)
	want := "client version: " + version.Version + "\ncontrol plane version: 1.31.0\ndata plane version: 1.31.0 (1 proxies)\n"
	if code != ExitOK || out != want {
		t.Errorf("version: %d\n%s\nwant\n%s%s", code, out, want, errs)
	}
	code, out, _ = run(t, "", "version", "--remote=false")
	if code != ExitOK || out != "client version: "+version.Version+"\n" {
		t.Errorf("version --remote=false: %d %q", code, out)
	}
	code, out, _ = run(t, "", "version", "--istiod", debug, "-o", "json")
	var mv struct {
		Client version.Info `json:"clientVersion"`
		Mesh   []struct {
			Component string
			Info      version.Info
		} `json:"meshVersion"`
		DataPlane []struct{ ID, IstioVersion string } `json:"dataPlaneVersion"`
	}
	if err := json.Unmarshal([]byte(out), &mv); code != ExitOK || err != nil || len(mv.Mesh) != 1 || mv.Mesh[0].Info.Version != "1.31.0" ||
		len(mv.DataPlane) != 1 || !strings.HasPrefix(mv.DataPlane[0].ID, "sidecar~127.0.0.31~productpage-0") {
		t.Errorf("version -o json: %d %v\n%s", code, err, out)
	}
	if code, _, errs := run(t, "", "version", "-o", "xml"); code != ExitUsage || !strings.Contains(errs, `--output "xml"`) {
		t.Errorf("version -o xml: %d %s", code, errs)
	}
}
