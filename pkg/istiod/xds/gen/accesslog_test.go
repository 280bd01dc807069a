package gen

import (
	"maps"
	"slices"
	"strings"
	"testing"

	filelogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	meshconfig "istio.io/api/mesh/v1alpha1"
)

// TestAccessLogs: the mesh's access log file, encoding and format as
// Istio reads them; TestConnectionManagersAsIstio (test/interop) compares
// the result with Istio's, these pin the edges.
func TestAccessLogs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mesh      *meshconfig.MeshConfig
		want      string // the text format, or the JSON fields' names sorted and joined; "" for no log
		formatter bool   // the req_without_query formatter
	}{
		{"no file, no log", &meshconfig.MeshConfig{AccessLogFormat: "%START_TIME%"}, "", false},
		{"default text", &meshconfig.MeshConfig{AccessLogFile: "/dev/stdout"}, defaultLogFormat, false},
		{"a text format ends its line", &meshconfig.MeshConfig{AccessLogFile: "/dev/stdout", AccessLogFormat: "%START_TIME%"}, "%START_TIME%\n", false},
		{"a format without the query asks for its formatter", &meshconfig.MeshConfig{AccessLogFile: "/dev/stdout", AccessLogFormat: "%REQ_WITHOUT_QUERY(:PATH)%\n"}, "%REQ_WITHOUT_QUERY(:PATH)%\n", true},
		{"JSON not an object: Istio's fields", &meshconfig.MeshConfig{AccessLogFile: "/dev/stdout", AccessLogEncoding: meshconfig.MeshConfig_JSON, AccessLogFormat: "[x]"},
			strings.Join(slices.Sorted(maps.Keys(defaultJSONLog)), ","), false},
		{"JSON object", &meshconfig.MeshConfig{AccessLogFile: "/dev/stdout", AccessLogEncoding: meshconfig.MeshConfig_JSON, AccessLogFormat: `{"n": 1, "p": "%REQ_WITHOUT_QUERY(:PATH)%"}`}, "n,p", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := accessLogs(tc.mesh)
			if tc.want == "" {
				if logs != nil {
					t.Fatalf("logs %v, want none", logs)
				}
				return
			}
			if len(logs) != 1 {
				t.Fatalf("%d logs, want 1", len(logs))
			}
			var fl filelogv3.FileAccessLog
			if err := logs[0].GetTypedConfig().UnmarshalTo(&fl); err != nil {
				t.Fatal(err)
			}
			lf := fl.GetLogFormat()
			got := lf.GetTextFormatSource().GetInlineString()
			if js := lf.GetJsonFormat(); js != nil {
				got = strings.Join(slices.Sorted(maps.Keys(js.GetFields())), ",")
			}
			if got != tc.want || fl.GetPath() != "/dev/stdout" {
				t.Errorf("file log at %s with %q, want /dev/stdout with %q", fl.GetPath(), got, tc.want)
			}
			if f := len(lf.GetFormatters()) == 1 && lf.GetFormatters()[0].GetName() == "envoy.formatter.req_without_query"; f != tc.formatter {
				t.Errorf("formatters %v, want req_without_query: %t", lf.GetFormatters(), tc.formatter)
			}
		})
	}
}
