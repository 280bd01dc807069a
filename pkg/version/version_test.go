package version

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCommand runs each form of Istio's "version" command.
func TestCommand(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := Command("pilot-agent", args, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, _ := run(); code != 0 || !strings.HasPrefix(out, `client version: version.BuildInfo{Version:"`+Version+`", GitRevision:"`) {
		t.Errorf("version: %d %q", code, out)
	}
	if code, out, _ := run("-s"); code != 0 || out != "client version: "+Version+"\n" {
		t.Errorf("version -s: %d %q", code, out)
	}
	code, out, _ := run("-o", "json")
	var got map[string]Info
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got["clientVersion"].Version != Version || got["clientVersion"].GolangVersion == "" {
		t.Errorf("version -o json: %d %q %v", code, out, err)
	}
	if code, out, _ := run("--output=yaml"); code != 0 || !strings.Contains(out, "clientVersion:\n  golang_version: go") || !strings.Contains(out, "  version: "+Version+"\n") {
		t.Errorf("version -o yaml: %d %q", code, out)
	}
	for _, args := range [][]string{{"-o", "xml"}, {"--frobnicate"}} {
		if code, _, errs := run(args...); code != 2 || !strings.Contains(errs, "pilot-agent version: ") {
			t.Errorf("version %q: %d %q, want 2 and the reason", args, code, errs)
		}
	}
}
