package duration_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	apinet "istio.io/api/networking/v1alpha3"
	apisec "istio.io/api/security/v1beta1"

	"github.com/skiff-mesh/skiff/pkg/istiod/duration"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{300 * time.Millisecond, "0.300s"},
		{time.Hour, "3600s"},
		{1500 * time.Microsecond, "0.001500s"},
		{time.Nanosecond, "0.000000001s"},
		{-2 * time.Second, "-2s"},
	} {
		if got := duration.Format(c.in); got != c.want {
			t.Errorf("Format(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNormalizeVirtualService reads spellings Istio accepts through
// protojson after NormalizeSpec, everywhere durations occur.
func TestNormalizeVirtualService(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"300ms", 300 * time.Millisecond},
		{"1h", time.Hour},
		{"1m", time.Minute},
		{"1s", time.Second},
		{"0.2s", 200 * time.Millisecond},
		{"1m30s", 90 * time.Second},
		{"1.5h", 90 * time.Minute},
		{"250us", 250 * time.Microsecond},
		{"0", 0},
	} {
		t.Run(c.in, func(t *testing.T) {
			js := `{"hosts":["a"],"http":[{"timeout":"` + c.in + `","retries":{"attempts":2,"perTryTimeout":"` + c.in + `"},
				"fault":{"delay":{"fixedDelay":"` + c.in + `","percentage":{"value":50}}},
				"corsPolicy":{"maxAge":"` + c.in + `"},"route":[{"destination":{"host":"a"}}]}]}`
			b, err := duration.NormalizeSpec("VirtualService", []byte(js))
			if err != nil {
				t.Fatal(err)
			}
			var vs apinet.VirtualService
			if err := protojson.Unmarshal(b, &vs); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			hr := vs.GetHttp()[0]
			for name, got := range map[string]time.Duration{
				"timeout": hr.GetTimeout().AsDuration(), "perTryTimeout": hr.GetRetries().GetPerTryTimeout().AsDuration(),
				"fixedDelay": hr.GetFault().GetDelay().GetFixedDelay().AsDuration(), "maxAge": hr.GetCorsPolicy().GetMaxAge().AsDuration(),
			} {
				if got != c.want {
					t.Errorf("%s = %v, want %v", name, got, c.want)
				}
			}
		})
	}
}

// TestNormalizeDestinationRule covers durations in maps-free nested
// messages, lists (subsets) and proto field names.
func TestNormalizeDestinationRule(t *testing.T) {
	js := `{"host":"a","trafficPolicy":{"connectionPool":{"tcp":{"connect_timeout":"10ms"}},
		"outlierDetection":{"interval":"1m","baseEjectionTime":"30s"}},
		"subsets":[{"name":"v1","trafficPolicy":{"loadBalancer":{"consistentHash":{"httpCookie":{"name":"c","ttl":"1h"}}}}}]}`
	b, err := duration.NormalizeSpec("DestinationRule", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	var dr apinet.DestinationRule
	if err := protojson.Unmarshal(b, &dr); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	tp := dr.GetTrafficPolicy()
	if got := tp.GetConnectionPool().GetTcp().GetConnectTimeout().AsDuration(); got != 10*time.Millisecond {
		t.Errorf("connectTimeout = %v", got)
	}
	if got := tp.GetOutlierDetection().GetInterval().AsDuration(); got != time.Minute {
		t.Errorf("interval = %v", got)
	}
	if got := dr.GetSubsets()[0].GetTrafficPolicy().GetLoadBalancer().GetConsistentHash().GetHttpCookie().GetTtl().AsDuration(); got != time.Hour {
		t.Errorf("ttl = %v", got)
	}
}

func TestNormalizeErrors(t *testing.T) {
	for _, c := range []struct {
		kind, js, field, value string
	}{
		{"VirtualService", `{"http":[{"timeout":"10"}]}`, "http[0].timeout", `"10"`},
		{"VirtualService", `{"http":[{},{"retries":{"perTryTimeout":"1d"}}]}`, "http[1].retries.perTryTimeout", `"1d"`},
		{"DestinationRule", `{"trafficPolicy":{"outlierDetection":{"interval":"fast"}}}`, "trafficPolicy.outlierDetection.interval", `"fast"`},
	} {
		_, err := duration.NormalizeSpec(c.kind, []byte(c.js))
		var de *duration.Error
		if !errors.As(err, &de) {
			t.Fatalf("%s: want *duration.Error, got %v", c.js, err)
		}
		if de.Field != c.field || de.Value != c.value {
			t.Errorf("%s: error names %s=%s, want %s=%s (%v)", c.js, de.Field, de.Value, c.field, c.value, err)
		}
	}
	if _, err := duration.NormalizeSpec("Gateway", []byte(`{}`)); err == nil {
		t.Error("unknown kind: no error")
	}
}

// TestUnchanged keeps input without durations to rewrite byte for byte.
func TestUnchanged(t *testing.T) {
	js := `{"hosts": ["a"], "http": [{"timeout": "2s"}]}`
	b, err := duration.NormalizeSpec("VirtualService", []byte(js))
	if err != nil || string(b) != js {
		t.Fatalf("got %s, %v", b, err)
	}
}

// FuzzNormalize checks that whatever NormalizeSpec accepts and rewrites
// keeps its meaning: the durations it writes protojson reads back as the
// value time.ParseDuration gave.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"300ms", "1h", "0.2s", "1m30s", "-1s", "1d", "", "1e3s", ".5s", "9223372036s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		js := []byte(`{"http":[{"timeout":` + quote(s) + `}]}`)
		b, err := duration.NormalizeSpec("VirtualService", js)
		want, perr := time.ParseDuration(s)
		if (err != nil) != (perr != nil) {
			t.Fatalf("%q: NormalizeSpec error %v, ParseDuration error %v", s, err, perr)
		}
		if err != nil {
			return
		}
		var vs apinet.VirtualService
		if err := protojson.Unmarshal(b, &vs); err != nil {
			t.Fatalf("%q: protojson rejects the rewrite %s: %v", s, b, err)
		}
		if got := vs.GetHttp()[0].GetTimeout().AsDuration(); got != want {
			t.Fatalf("%q: read back %v, want %v", s, got, want)
		}
	})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUnmarshal reads a DestinationRule and a security spec (any message
// works, not only the kinds NormalizeSpec names).
func TestUnmarshal(t *testing.T) {
	var dr apinet.DestinationRule
	if err := duration.Unmarshal([]byte(`{"host":"a","trafficPolicy":{"outlierDetection":{"interval":"300ms"}}}`), &dr); err != nil {
		t.Fatal(err)
	}
	if got := dr.GetTrafficPolicy().GetOutlierDetection().GetInterval().AsDuration(); got != 300*time.Millisecond {
		t.Errorf("interval = %v", got)
	}
	var ra apisec.RequestAuthentication
	if err := duration.Unmarshal([]byte(`{"jwtRules":[{"issuer":"i","timeout":"1m"}]}`), &ra); err != nil {
		t.Fatal(err)
	}
	if got := ra.GetJwtRules()[0].GetTimeout().AsDuration(); got != time.Minute {
		t.Errorf("jwt timeout = %v", got)
	}
	var de *duration.Error
	if err := duration.Unmarshal([]byte(`{"http":[{"timeout":"soon"}]}`), &apinet.VirtualService{}); !errors.As(err, &de) || de.Field != "http[0].timeout" {
		t.Errorf("invalid duration: %v", err)
	}
}
