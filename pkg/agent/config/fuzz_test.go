package config

import (
	"strings"
	"testing"
)

// fuzzVars are variables Load parses beyond plain strings, the pod's
// environment (from its template and the mesh's proxyMetadata).
var fuzzVars = []string{
	"PROXY_CONFIG", "INSTANCE_IP", "SECRET_TTL", "SECRET_GRACE_PERIOD_RATIO", "SECRET_GRACE_PERIOD_RATIO_JITTER",
	"ECC_SIGNATURE_ALGORITHM", "ECC_CURVE", "WORKLOAD_RSA_KEY_SIZE", "DNS_PROXY_ADDR", "DNS_FORWARD_TIMEOUT",
	"ISTIO_KUBE_APP_PROBERS", "ISTIO_PROMETHEUS_ANNOTATIONS", "ISTIO_METAJSON_LABELS", "MINIMUM_DRAIN_DURATION",
	"EXIT_ON_ZERO_ACTIVE_CONNECTIONS", "ISTIO_ENABLE_HTTP2_PROBING", "CA_PROVIDER", "WORKLOAD_IDENTITY_SOCKET_FILE",
}

// FuzzLoad sets one of the agent's variables to any value: Load never
// panics, and when it refuses the value its error names the variable.
func FuzzLoad(f *testing.F) {
	f.Add(uint8(0), `{"discoveryAddress": "istiod:15012", "proxyMetadata": {"SECRET_TTL": "x"}}`)
	f.Add(uint8(2), "-1h")
	f.Add(uint8(8), "[::1]:53")
	f.Add(uint8(10), `{"/app-health/a/livez": {"httpGet": {"port": 80}}}`)
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		name := fuzzVars[int(which)%len(fuzzVars)]
		_, err := Load([]string{name + "=" + value}, "sidecar")
		// PROXY_CONFIG's proxyMetadata entries are variables too: an error
		// may name one of them (NAME="value") instead.
		if err != nil && !strings.Contains(err.Error(), name) && !(name == "PROXY_CONFIG" && strings.Contains(err.Error(), `="`)) {
			t.Fatalf("%s=%q: error %q does not name the variable", name, value, err)
		}
	})
}
