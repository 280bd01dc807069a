package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"
)

// The reference: how pilot-agent read PROXY_CONFIG before, with
// istio.io/api's generated ProxyConfig and protojson. ParseProxyConfig
// must accept what it accepts, and give the same fields and the same
// PROXY_CONFIG node metadata.

func referenceDefaults() *meshconfig.ProxyConfig {
	return &meshconfig.ProxyConfig{
		ConfigPath:               "./etc/istio/proxy",
		BinaryPath:               "/usr/local/bin/envoy",
		DrainDuration:            durationpb.New(45 * time.Second),
		TerminationDrainDuration: durationpb.New(5 * time.Second),
		DiscoveryAddress:         DefaultAddress,
		ProxyAdminPort:           15000,
		ControlPlaneAuthPolicy:   meshconfig.AuthenticationPolicy_MUTUAL_TLS,
		StatNameLength:           189,
		StatusPort:               15020,
		ClusterName:              &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"},
	}
}

func referenceParse(s string) (*meshconfig.ProxyConfig, error) {
	pc := referenceDefaults()
	if strings.TrimSpace(s) == "" {
		return pc, nil
	}
	js, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: not JSON or YAML: %w", err)
	}
	var over meshconfig.ProxyConfig
	if err := protojson.Unmarshal(js, &over); err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: %w", err)
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(js, &keys)
	proto.Merge(pc, &over)
	for _, k := range []string{"controlPlaneAuthPolicy", "control_plane_auth_policy"} {
		if _, ok := keys[k]; ok {
			pc.ControlPlaneAuthPolicy = over.ControlPlaneAuthPolicy
		}
	}
	if pc.StatusPort <= 0 || pc.StatusPort > 65535 {
		return nil, fmt.Errorf("PROXY_CONFIG: statusPort %d is not a port", pc.StatusPort)
	}
	if _, _, err := net.SplitHostPort(pc.DiscoveryAddress); err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: discoveryAddress %q: %w", pc.DiscoveryAddress, err)
	}
	return pc, nil
}

// referenceMap is the node metadata the agent sent: protojson's output,
// decoded by encoding/json.
func referenceMap(pc *meshconfig.ProxyConfig) (map[string]any, error) {
	b, err := protojson.Marshal(pc)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

func referenceTyped(pc *meshconfig.ProxyConfig) ProxyConfig {
	var conc *int32
	if pc.Concurrency != nil {
		v := pc.Concurrency.GetValue()
		conc = &v
	}
	return ProxyConfig{
		DiscoveryAddress: pc.DiscoveryAddress, StatusPort: pc.StatusPort, ProxyAdminPort: pc.ProxyAdminPort,
		Concurrency: conc, DrainDuration: pc.DrainDuration.AsDuration(), TerminationDrainDuration: pc.TerminationDrainDuration.AsDuration(),
		BinaryPath: pc.BinaryPath, ConfigPath: pc.ConfigPath, ServiceCluster: pc.GetServiceCluster(),
		ProxyMetadata: pc.ProxyMetadata, ControlPlaneAuthPolicy: AuthenticationPolicy(pc.ControlPlaneAuthPolicy),
	}
}

var cmpTyped = cmp.Options{cmpopts.IgnoreUnexported(ProxyConfig{}), cmpopts.EquateEmpty()}

// checkAgainstReference parses in both ways and reports any difference:
// acceptance, typed fields, node metadata (also after the agent's kind of
// changes to the typed fields). It reports whether in was accepted.
func checkAgainstReference(t testing.TB, in string) bool {
	t.Helper()
	want, wantErr := referenceParse(in)
	got, err := ParseProxyConfig(in)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("PROXY_CONFIG=%q: error %v, the reference's %v", in, err, wantErr)
	}
	if err != nil {
		if !strings.HasPrefix(err.Error(), "PROXY_CONFIG: ") {
			t.Errorf("PROXY_CONFIG=%q: error %q does not name PROXY_CONFIG", in, err)
		}
		return false
	}
	if diff := cmp.Diff(referenceTyped(want), *got, cmpTyped); diff != "" {
		t.Errorf("PROXY_CONFIG=%q: fields (-reference +got):\n%s", in, diff)
	}
	compareMaps(t, in, want, got)

	// The agent's changes after parsing (--concurrency, tests' ports and
	// durations) show in the metadata as they did in the proto.
	c := int32(3)
	got.Concurrency, want.Concurrency = &c, wrapperspb.Int32(3)
	got.DrainDuration, want.DrainDuration = 7*time.Second, durationpb.New(7*time.Second)
	got.TerminationDrainDuration, want.TerminationDrainDuration = 1500*time.Millisecond, durationpb.New(1500*time.Millisecond)
	got.ProxyAdminPort, want.ProxyAdminPort = 0, 0
	got.StatusPort, want.StatusPort = 16000, 16000
	got.BinaryPath, want.BinaryPath = "/bin/envoy", "/bin/envoy"
	got.ServiceCluster, want.ClusterName = "c1", &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: "c1"}
	got.ControlPlaneAuthPolicy, want.ControlPlaneAuthPolicy = AuthNone, meshconfig.AuthenticationPolicy_NONE
	got.ProxyMetadata, want.ProxyMetadata = map[string]string{"K": "v"}, map[string]string{"K": "v"}
	compareMaps(t, in+" (changed)", want, got)
	return true
}

func compareMaps(t testing.TB, in string, want *meshconfig.ProxyConfig, got *ProxyConfig) {
	t.Helper()
	wantMap, wantErr := referenceMap(want)
	gotMap, err := got.AsMap()
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("PROXY_CONFIG=%q: AsMap error %v, the reference's %v", in, err, wantErr)
	}
	if diff := cmp.Diff(wantMap, gotMap); diff != "" {
		t.Errorf("PROXY_CONFIG=%q: metadata (-reference +got):\n%s", in, diff)
	}
	// As JSON too, where -0 and 0 differ.
	wb, _ := json.Marshal(wantMap)
	gb, _ := json.Marshal(gotMap)
	if !bytes.Equal(wb, gb) {
		t.Errorf("PROXY_CONFIG=%q: metadata JSON\n%s\nthe reference's\n%s", in, gb, wb)
	}
}

// handCorpus exercises every kind of field, protojson's edge cases, and
// the merge over the defaults.
var handCorpus = []string{
	// Nothing, and not an object.
	"", "  \n", "{}", "null", "~", "[]", "5", "x", `"x"`, "# only a comment", "{", "a: [1, 2", "---\n", "true",
	// Durations.
	`{"drainDuration": "10s"}`, `{"drainDuration": "1.5s"}`, `{"drainDuration": "1.500s"}`, `{"drainDuration": "0.000000001s"}`,
	`{"drainDuration": "1.0000000001s"}`, `{"drainDuration": ".5s"}`, `{"drainDuration": "1.s"}`, `{"drainDuration": ".s"}`,
	`{"drainDuration": "-.s"}`, `{"drainDuration": "+1s"}`, `{"drainDuration": "-1s"}`, `{"drainDuration": "-0.5s"}`,
	`{"drainDuration": "0s"}`, `{"drainDuration": "00s"}`, `{"drainDuration": "01s"}`, `{"drainDuration": "1"}`,
	`{"drainDuration": "1m"}`, `{"drainDuration": "1.5"}`, `{"drainDuration": "315576000000s"}`, `{"drainDuration": "315576000001s"}`,
	`{"drainDuration": "-315576000000s"}`, `{"drainDuration": "-315576000000.5s"}`, `{"drainDuration": "9223372036854775808s"}`,
	`{"drainDuration": " 1s"}`, `{"drainDuration": "1s "}`, `{"drainDuration": "1e3s"}`, `{"drainDuration": "١s"}`,
	`{"drainDuration": ""}`, `{"drainDuration": "s"}`, `{"drainDuration": "-s"}`, `{"drainDuration": "+s"}`, `{"drainDuration": "1..5s"}`,
	`{"drainDuration": 45}`, `{"drainDuration": true}`, `{"drainDuration": {}}`, `{"drainDuration": []}`, `{"drainDuration": null}`,
	`{"drainDuration": "45"}`, `{"drainDuration": "0.5s"}`, `{"drainDuration": "-10s"}`, `{"drainDuration": "-10.5s"}`,
	`{"terminationDrainDuration": "1.5s"}`, `{"terminationDrainDuration": "-0.000000001s"}`, `{"drainDuration": "10.000001s"}`,
	`{"discoveryRefreshDelay": "0s"}`, `{"discoveryRefreshDelay": "-0.5s"}`, `{"fileFlushInterval": "1.123456789s"}`,
	"drainDuration: 10s\nterminationDrainDuration: 30s", "drainDuration: 1h",
	`{"connectionSettings": {"httpIdleTimeout": "1s", "httpMaxConnectionDuration": "-2s", "http2InitialStreamWindowSize": 65536}}`,
	`{"privateKeyProvider": {"cryptomb": {"pollDelay": "0.01s", "fallback": true}}}`,
	`{"privateKeyProvider": {"qat": {"pollDelay": "1s"}}}`, `{"privateKeyProvider": {"qat": {}, "cryptomb": {}}}`,
	`{"privateKeyProvider": {"qat": null, "cryptomb": {}}}`,
	`{"envoyAccessLogService": {"address": "als:9000", "tcpKeepalive": {"probes": 3, "time": "10s", "interval": "5s"}}}`,
	// 32-bit integers.
	`{"statusPort": 15021}`, `{"statusPort": "15021"}`, `{"statusPort": 15021.0}`, `{"statusPort": 1.5e4}`, `{"statusPort": "1.5e4"}`,
	`{"statusPort": 15021.5}`, `{"statusPort": " 15021"}`, `{"statusPort": "15021 "}`, `{"statusPort": "0x10"}`, `{"statusPort": 2147483648}`,
	`{"statusPort": -1}`, `{"statusPort": 70000}`, `{"statusPort": 0}`, `{"statusPort": "0"}`, `{"statusPort": "x"}`, `{"statusPort": true}`,
	`{"statusPort": "1e3"}`, `{"statusPort": "1E+3"}`, `{"statusPort": "100e-2"}`, `{"statusPort": "1000e-3"}`, `{"statusPort": "15e-1"}`,
	`{"statusPort": "-0"}`, `{"statusPort": "01"}`, `{"statusPort": "+1"}`, `{"statusPort": "1."}`, `{"statusPort": ".5"}`,
	`{"statusPort": "0.0000000000000000000001e22"}`, `{"statusPort": 1e400}`, `{"statusPort": "1e400"}`, `{"statusPort": "0e99999999999"}`,
	`{"statusPort": "\"1\""}`, `{"statusPort": [1]}`, `{"statusPort": null}`,
	`{"proxyAdminPort": -5}`, `{"proxyAdminPort": 0}`, `{"statNameLength": "-2147483648"}`, `{"statNameLength": -2147483649}`,
	"statNameLength: 18446744073709551616", "statusPort: 0x3a99", "statusPort: 0o17", "statusPort: 1_000",
	// Unsigned and 64-bit integers.
	`{"tracing": {"maxPathTagLength": 256}}`, `{"tracing": {"maxPathTagLength": "256"}}`, `{"tracing": {"maxPathTagLength": -1}}`,
	`{"tracing": {"maxPathTagLength": 4294967296}}`, `{"tracing": {"maxPathTagLength": 4294967295}}`, `{"tracing": {"maxPathTagLength": 1e2}}`,
	`{"tracing": {"maxPathTagLength": "-0"}}`,
	`{"tracing": {"stackdriver": {"maxNumberOfAttributes": 200, "maxNumberOfAnnotations": "9223372036854775807", "maxNumberOfMessageEvents": "-5"}}}`,
	`{"tracing": {"stackdriver": {"maxNumberOfAttributes": "9223372036854775808"}}}`, `{"tracing": {"stackdriver": {"maxNumberOfAttributes": 1e18}}}`,
	`{"tracing": {"stackdriver": {"maxNumberOfAttributes": "1e18"}}}`, `{"tracing": {"stackdriver": {"maxNumberOfAttributes": 0}}}`,
	`{"tracing": {"stackdriver": {"maxNumberOfAttributes": 1e20}}}`, `{"tracing": {"stackdriver": {"debug": true}}}`,
	// Doubles.
	`{"tracing": {"sampling": 1}}`, `{"tracing": {"sampling": 0.5}}`, `{"tracing": {"sampling": "0.5"}}`, `{"tracing": {"sampling": "NaN"}}`,
	`{"tracing": {"sampling": "Infinity"}}`, `{"tracing": {"sampling": "-Infinity"}}`, `{"tracing": {"sampling": "nan"}}`,
	`{"tracing": {"sampling": "1e400"}}`, `{"tracing": {"sampling": -0}}`, `{"tracing": {"sampling": "-0"}}`, `{"tracing": {"sampling": 1e-7}}`,
	`{"tracing": {"sampling": 1e21}}`, `{"tracing": {"sampling": 0.1}}`, `{"tracing": {"sampling": 100.0000000000000001}}`,
	`{"tracing": {"sampling": true}}`, `{"tracing": {"sampling": " 1"}}`, `{"tracing": {"sampling": "Inf"}}`, "tracing:\n  sampling: .nan",
	"tracing:\n  sampling: -.inf", "tracing:\n  sampling: 5e-324",
	// Booleans and wrappers.
	`{"sds": {"enabled": true}}`, `{"sds": {"enabled": false}}`, `{"sds": {"enabled": "true"}}`, `{"sds": {"enabled": 1}}`,
	`{"holdApplicationUntilProxyStarts": true}`, `{"holdApplicationUntilProxyStarts": false}`, `{"holdApplicationUntilProxyStarts": "true"}`,
	`{"holdApplicationUntilProxyStarts": null}`, `{"holdApplicationUntilProxyStarts": {"value": true}}`, "holdApplicationUntilProxyStarts: yes",
	`{"concurrency": 0}`, `{"concurrency": 2}`, `{"concurrency": "2"}`, `{"concurrency": -1}`, `{"concurrency": 2.0}`, `{"concurrency": 2.5}`,
	`{"concurrency": null}`, `{"concurrency": {"value": 2}}`, `{"concurrency": 2147483647}`, `{"concurrency": 2147483648}`, `{"concurrency": [2]}`,
	`{"statsCompression": false}`,
	// Enums.
	`{"controlPlaneAuthPolicy": "NONE"}`, `{"controlPlaneAuthPolicy": "MUTUAL_TLS"}`, `{"controlPlaneAuthPolicy": "INHERIT"}`,
	`{"controlPlaneAuthPolicy": 0}`, `{"controlPlaneAuthPolicy": 1}`, `{"controlPlaneAuthPolicy": 1000}`, `{"controlPlaneAuthPolicy": 7}`,
	`{"controlPlaneAuthPolicy": "7"}`, `{"controlPlaneAuthPolicy": "none"}`, `{"controlPlaneAuthPolicy": null}`, `{"controlPlaneAuthPolicy": 1.0}`,
	`{"controlPlaneAuthPolicy": -1}`, `{"controlPlaneAuthPolicy": 2147483648}`, `{"control_plane_auth_policy": "NONE"}`,
	`{"control_plane_auth_policy": null}`, `{"controlPlaneAuthPolicy": "NONE", "control_plane_auth_policy": "NONE"}`,
	`{"interceptionMode": "TPROXY"}`, `{"interceptionMode": 2}`, `{"interceptionMode": "REDIRECT"}`, `{"interceptionMode": 9}`,
	// Oneofs.
	`{"tracingServiceName": "CANONICAL_NAME_ONLY"}`, `{"tracingServiceName": 0}`, `{"tracingServiceName": "APP_LABEL_AND_NAMESPACE"}`,
	`{"serviceCluster": ""}`, `{"serviceCluster": "x", "tracingServiceName": 1}`, `{"serviceCluster": "x", "tracingServiceName": null}`,
	`{"serviceCluster": null}`, `{"service_cluster": "y"}`, `{"tracing_service_name": "CANONICAL_NAME_AND_NAMESPACE"}`,
	`{"tracing": {"zipkin": {"address": "zipkin:9411"}, "lightstep": {}}}`, `{"tracing": {"zipkin": {}, "datadog": null}}`,
	`{"tracing": {"datadog": {"address": "dd:8126"}}}`, `{"tracing": {"lightstep": {"address": "ls:443", "accessToken": "t"}}}`,
	`{"tracing": {"openCensusAgent": {"address": "oc:55678", "context": ["W3C_TRACE_CONTEXT", 1, "B3"]}}}`,
	`{"tracing": {"openCensusAgent": {"context": ["NOPE"]}}}`, `{"tracing": {"openCensusAgent": {"context": [null]}}}`,
	`{"tracing": {"openCensusAgent": {"context": [7, 0]}}}`,
	// Snake case.
	`{"drain_duration": "3s", "proxy_metadata": {"A": "b"}, "discovery_address": "istiod:15012"}`,
	`{"drainDuration": "3s", "drain_duration": "4s"}`, `{"drainDuration": null, "drain_duration": "4s"}`,
	`{"tracing": {"open_census_agent": {"context": ["GRPC_BIN"]}, "max_path_tag_length": 5, "custom_tags": {"a": {"literal": {"value": "x"}}}}}`,
	`{"readiness_probe": {"http_get": {"http_headers": [{"name": "h", "value": "v"}], "port": 8080}, "initial_delay_seconds": 1}}`,
	// Nested messages.
	`{"tracing": {"customTags": {"lit": {"literal": {"value": "v"}}, "env": {"environment": {"name": "N", "defaultValue": "d"}}, "hdr": {"header": {"name": "x-h"}}, "empty": {}}}}`,
	`{"tracing": {"customTags": {"a": null}}}`, `{"tracing": {"customTags": {"a": {"literal": {}, "header": {}}}}}`,
	`{"tracing": {"tlsSettings": {"mode": "MUTUAL", "subjectAltNames": ["a", "b"], "insecureSkipVerify": true, "sni": "s"}}}`,
	`{"tracing": {"tlsSettings": {"mode": "NOPE"}}}`, `{"tracing": {"enableIstioTags": false}}`, `{"tracing": {}}`, `{"tracing": null}`,
	`{"tracing": "x"}`, `{"tracing": []}`, `{"tracing": {"zipkin": {"nope": 1}}}`,
	`{"proxyStatsMatcher": {"inclusionPrefixes": ["cluster.outbound"], "inclusionSuffixes": ["rbac"], "inclusionRegexps": [".*osconfig.*"]}}`,
	`{"proxyStatsMatcher": {"inclusionRegexps": []}}`, `{"proxyStatsMatcher": {}}`,
	`{"readinessProbe": {"tcpSocket": {"host": "h", "port": 80}, "periodSeconds": 5, "failureThreshold": 3}}`,
	`{"readinessProbe": {"httpGet": {"path": "/"}, "tcpSocket": {}}}`, `{"readinessProbe": {"exec": {"command": ["a", "b"]}}}`,
	`{"readinessProbe": {"grpc": {"port": 9000, "service": "s"}}}`, `{"readinessProbe": {"httpGet": {"port": -1}}}`,
	`{"readinessProbe": {"httpGet": {"httpHeaders": [null]}}}`, `{"readinessProbe": {"httpGet": {"httpHeaders": [{}, {"name": "n"}]}}}`,
	`{"image": {"imageType": "distroless"}}`, `{"image": {"imageType": ""}}`, `{"image": {}}`, `{"image": "distroless"}`,
	`{"proxyHeaders": {"forwardedClientCert": "SANITIZE", "setCurrentClientCertDetails": {"subject": true, "dns": false}, "requestId": {"disabled": true}, "server": {"disabled": false, "value": "x"}, "attemptCount": {"disabled": true}, "envoyDebugHeaders": {"disabled": true}, "metadataExchangeHeaders": {"mode": "IN_MESH"}, "preserveHttp1HeaderCase": true, "xForwardedHost": {"enabled": true}, "xForwardedPort": {"enabled": false}}}`,
	`{"proxyHeaders": {"forwardedClientCert": 3}}`, `{"proxyHeaders": {"metadataExchangeHeaders": {"mode": "nope"}}}`,
	`{"gatewayTopology": {"numTrustedProxies": 2, "forwardClientCertDetails": "APPEND_FORWARD", "proxyProtocol": {}}}`,
	`{"gatewayTopology": {"proxyProtocol": {"x": 1}}}`, `{"gatewayTopology": {"proxyProtocol": null}}`,
	`{"sds": {"enabled": true, "k8sSaJwtPath": "/p"}}`, `{"envoyMetricsService": {"address": "m:1", "tlsSettings": {"caCertificates": "/c"}}}`,
	`{"connectionSettings": {"profile": "LOW_LATENCY", "httpHeadersWithUnderscoresAction": "REJECT_REQUEST", "httpMergeSlashes": true, "httpPathWithEscapedSlashesAction": "UNESCAPE_AND_REDIRECT", "listenerConnectionLimit": 100, "globalDownstreamConnectionLimit": "1000"}}`,
	// Maps.
	`{"proxyMetadata": {"A": "1", "B": ""}}`, `{"proxyMetadata": {"A": 1}}`, `{"proxyMetadata": {"A": null}}`, `{"proxyMetadata": {}}`,
	`{"proxyMetadata": []}`, `{"proxyMetadata": "A=1"}`, `{"proxyMetadata": {"": "empty key", "ключ": "значение", "nul\u0000": "a\"b\\c\n"}}`,
	`{"runtimeValues": {"re2.max_program_size.error_level": "1024"}}`, `{"runtimeValues": {"a": true}}`,
	"proxyMetadata:\n  ISTIO_META_DNS_CAPTURE: \"true\"\n  ISTIO_META_DNS_AUTO_ALLOCATE: true",
	"proxyMetadata:\n  N: 1", "proxyMetadata:\n  N: \"1\"\n  1: n",
	// Lists.
	`{"extraStatTags": ["a", "b"]}`, `{"extraStatTags": []}`, `{"extraStatTags": null}`, `{"extraStatTags": ["a", null]}`,
	`{"extraStatTags": "a"}`, `{"extraStatTags": [1]}`, `{"extraStatTags": {}}`, `{"caCertificatesPem": ["-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"]}`,
	"extraStatTags:\n- a\n- b\n",
	// Unknown fields and wrong spellings.
	`{"noSuchField": 1}`, `{"noSuchField": null}`, `{"tracing": {"zipkin": {"address": "a", "port": 1}}}`, `{"[foo.bar]": 1}`,
	`{"[istio.mesh.v1alpha1.x]": 1}`, `{"DrainDuration": "1s"}`, `{"drainduration": "1s"}`, `{"@type": "x"}`, `{"drain-duration": "1s"}`,
	// Other wrong types.
	`{"discoveryAddress": 5}`, `{"discoveryAddress": true}`, `{"discoveryAddress": ["a"]}`, `{"binaryPath": {}}`,
	// Validation after the merge.
	`{"discoveryAddress": "nohostport"}`, `{"discoveryAddress": ""}`, `{"discoveryAddress": "[::1]:15012"}`, `{"discoveryAddress": "ístiod:1"}`,
	`{"discoveryAddress": "istiod.istio-system.svc:15010", "controlPlaneAuthPolicy": "NONE"}`,
	// YAML.
	"discoveryAddress: istiod.x.svc:15010\ncontrolPlaneAuthPolicy: NONE\ndrainDuration: 10s\nstatusPort: 16020\n",
	"base: &b\n  address: a\n", "tracing:\n  zipkin: &z\n    address: z:9411\n", "statusPort: 1\nstatusPort: 2\n",
	"tracing: {zipkin: {address: \"zipkin.istio-system:9411\"}}", "- a\n- b\n", "image:\n  imageType: distroless\nholdApplicationUntilProxyStarts: true",
	"concurrency: 2\nproxyMetadata: {}\n", "proxyAdminPort: 15000.0", "statusPort: '15020'", "drainDuration: !!str 5s",
	// Istio's injection template's PROXY_CONFIG values (in this repository's goldens).
	`{"statusPort":15099}`, `{"proxyMetadata":{"ISTIO_META_DNS_CAPTURE":"true"},"holdApplicationUntilProxyStarts":true}`,
	`{"discoveryAddress":"istiod.istio-system.svc:15012","tracing":{"zipkin":{"address":"zipkin.istio-system:9411"}},"proxyMetadata":{"ISTIO_META_DNS_CAPTURE":"true"},"image":{"imageType":"distroless"},"holdApplicationUntilProxyStarts":true,"concurrency":2,"meshId":"cluster.local","terminationDrainDuration":"30s"}`,
}

// existingTestInputs are the PROXY_CONFIG values of this package's other tests.
var existingTestInputs = []string{
	`{"discoveryAddress": "istiod.x.svc:15010", "controlPlaneAuthPolicy": "NONE", "drainDuration": "10s", "statusPort": 16020, "proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true"}, "concurrency": 2}`,
	"discoveryAddress: istiod.x.svc:15010\ncontrolPlaneAuthPolicy: NONE\ndrainDuration: 10s\nstatusPort: 16020\nproxyMetadata:\n  ISTIO_META_DNS_CAPTURE: \"true\"\nconcurrency: 2\n",
	`{"proxyMetadata": {"SECRET_TTL": "1h", "ISTIO_META_MESH_ID": "m1", "DNS_PROXY_ADDR": "localhost:15054"}}`,
	"discoveryAddress: istiod.x.svc:15010\ncontrolPlaneAuthPolicy: NONE\ndrainDuration: 10s\nconcurrency: 2\n",
	`{"proxyMetadata": {"DNS_PROXY_ADDR": "x"}}`, `{"statusPort": 70000}`, `{"statusPort": "x"}`, `{"discoveryAddress": "nohostport"}`,
	`{"noSuchField": 1}`, "discoveryAddress: [1, 2", `{"discoveryAddress": "istiod:15012", "proxyMetadata": {"SECRET_TTL": "x"}}`,
}

// repoGoldenInputs are the PROXY_CONFIG values in this repository's
// injection goldens.
func repoGoldenInputs(t testing.TB) []string {
	return proxyConfigsIn(t, "../../istiod/inject/testdata", "../../istioctl/testdata")
}

// istioModule is the istio.io/istio module pkg/istiod/inject/istiochart
// renders (its Module); only its test data is read, never its code.
const istioModule = "istio.io/istio@v0.0.0-20260827124520-eed52ebb66ad"

var istioInputs = sync.OnceValues(func() ([]string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", istioModule).Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %w", istioModule, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return nil, fmt.Errorf("go mod download %s: %v %s", istioModule, err, m.Error)
	}
	return proxyConfigsIn(nil, m.Dir), nil
})

// proxyConfigsIn finds proxy configs in the YAML files under dirs: the
// values of PROXY_CONFIG variables and proxy.istio.io/config annotations,
// and mesh configs' defaultConfig (as JSON).
func proxyConfigsIn(t testing.TB, dirs ...string) []string {
	var found []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["name"] == "PROXY_CONFIG" {
				if s, ok := v["value"].(string); ok {
					found = append(found, s)
				}
			}
			for k, x := range v {
				switch s := x.(type) {
				case string:
					if k == "proxy.istio.io/config" {
						found = append(found, s)
					}
					// Mesh configs are often a YAML string in a ConfigMap.
					if (k == "mesh" || k == "meshConfig") && strings.Contains(s, "defaultConfig") {
						var m any
						if yaml.Unmarshal([]byte(s), &m) == nil {
							walk(m)
						}
					}
				case map[string]any:
					if k == "defaultConfig" {
						if js, err := json.Marshal(s); err == nil {
							found = append(found, string(js))
						}
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml") && !strings.HasSuffix(path, ".injected") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil || len(b) > 1<<20 || !bytes.Contains(b, []byte("PROXY_CONFIG")) &&
				!bytes.Contains(b, []byte("proxy.istio.io/config")) && !bytes.Contains(b, []byte("defaultConfig")) {
				return nil
			}
			for _, doc := range bytes.Split(b, []byte("\n---")) {
				var v any
				if yaml.Unmarshal(doc, &v) == nil {
					walk(v)
				}
			}
			return nil
		})
		if err != nil && t != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(found)
	return slices.Compact(found)
}

// corpus is every input the differential test and the fuzz target start
// from; the Istio module's only when it can be had.
func corpus(t testing.TB) (all []string, fromIstio int) {
	all = append(all, handCorpus...)
	all = append(all, existingTestInputs...)
	all = append(all, repoGoldenInputs(t)...)
	if in, err := istioInputs(); err != nil {
		t.Logf("Istio's test data skipped: %v", err)
	} else {
		all = append(all, in...)
		fromIstio = len(in)
	}
	slices.Sort(all)
	return slices.Compact(all), fromIstio
}

// TestProxyConfigAgainstIstioAPI: for every input of the corpus,
// ParseProxyConfig and the reference (istio.io/api's ProxyConfig,
// protojson, proto.Merge) agree on acceptance, fields and metadata.
func TestProxyConfigAgainstIstioAPI(t *testing.T) {
	all, fromIstio := corpus(t)
	accepted := 0
	for _, in := range all {
		if checkAgainstReference(t, in) {
			accepted++
		}
	}
	t.Logf("%d inputs (%d from Istio's test data), %d accepted", len(all), fromIstio, accepted)
	if fromIstio == 0 {
		return
	}
	if fromIstio < 10 {
		t.Errorf("only %d proxy configs found in Istio's test data", fromIstio)
	}
}

// FuzzProxyConfig: on any input, ParseProxyConfig never panics and agrees
// with the reference.
func FuzzProxyConfig(f *testing.F) {
	all, _ := corpus(f)
	for _, in := range all {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkAgainstReference(t, in)
	})
}

// TestDefaultProxyConfig: the defaults are the reference's, field by field
// and as metadata.
func TestDefaultProxyConfig(t *testing.T) {
	want := referenceDefaults()
	got := DefaultProxyConfig()
	if diff := cmp.Diff(referenceTyped(want), *got, cmpTyped); diff != "" {
		t.Errorf("defaults (-reference +got):\n%s", diff)
	}
	compareMaps(t, "(defaults)", want, got)
	// A config built by hand has the typed fields only.
	m, err := (&ProxyConfig{StatusPort: 15020, DrainDuration: 2 * time.Second}).AsMap()
	if err != nil || !cmp.Equal(m, map[string]any{"statusPort": 15020.0, "drainDuration": "2s"}) {
		t.Errorf("AsMap of typed fields: %v, %v", m, err)
	}
}

// TestProxyConfigErrors: errors name the field's path and quote the value.
func TestProxyConfigErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"drainDuration": "45"}`:                             `PROXY_CONFIG: drainDuration: "45" is not a duration`,
		`{"statusPort": 1.5}`:                                 `PROXY_CONFIG: statusPort: 1.5 is not an int32`,
		`{"tracing": {"zipkin": {"adress": "z"}}}`:            `PROXY_CONFIG: tracing.zipkin.adress: unknown field`,
		`{"proxyMetadata": {"A": 1}}`:                         `PROXY_CONFIG: proxyMetadata["A"]: 1 is not a string`,
		`{"extraStatTags": ["a", 2]}`:                         `PROXY_CONFIG: extraStatTags[1]: 2 is not a string`,
		`{"controlPlaneAuthPolicy": "TLS"}`:                   `PROXY_CONFIG: controlPlaneAuthPolicy: "TLS" is not a value of istio.mesh.v1alpha1.AuthenticationPolicy`,
		`{"serviceCluster": "a", "tracingServiceName": 1}`:    `PROXY_CONFIG: tracingServiceName: another field of oneof cluster_name is set`,
		`{"drain_duration": "1s", "drainDuration": "1s"}`:     `PROXY_CONFIG: drain_duration: field given twice`,
		`{"readinessProbe": {"httpGet": {"httpHeaders": 1}}}`: `PROXY_CONFIG: readinessProbe.httpGet.httpHeaders: 1 is not a list`,
		`[1]`: `PROXY_CONFIG: a list is not an object`,
	} {
		_, err := ParseProxyConfig(in)
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", in, err, want)
		}
	}
}

// TestProxyConfigDeps: the package's production code links neither
// istio.io/api nor the protobuf runtime (the tests do, for the reference).
func TestProxyConfigDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Skipf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "sigs.k8s.io/yaml") {
		t.Fatalf("go list -deps: %d packages, not this package's", len(deps))
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "istio.io/api") || strings.HasPrefix(p, "google.golang.org/protobuf") {
			t.Errorf("production dependency %s", p)
		}
	}
}

// fieldPath is a field of the schema, nested at its place in a document.
type fieldPath struct {
	name string
	// doc is a document with raw (JSON) as the field's value.
	doc func(raw string) string
}

// schemaPaths lists every field of t and of its messages, by JSON name or,
// with snake, by proto name; a map's messages under key "k", a list's as
// its one element.
func schemaPaths(t *messageType, prefix string, wrap func(string) string, snake bool) []fieldPath {
	var out []fieldPath
	for _, f := range t.Fields {
		name := f.JSONName
		if snake {
			name = f.Name
		}
		inner := func(raw string) string { return wrap(`{"` + name + `": ` + raw + `}`) }
		out = append(out, fieldPath{prefix + name, inner})
		if f.Kind != kindMessage || f.Message.WellKnown != notWellKnown {
			continue
		}
		elem := inner
		switch {
		case f.MapKey != 0:
			elem = func(raw string) string { return inner(`{"k": ` + raw + `}`) }
		case f.Repeated:
			elem = func(raw string) string { return inner(`[` + raw + `]`) }
		}
		out = append(out, schemaPaths(f.Message, prefix+name+".", elem, snake)...)
	}
	return out
}

var allSchemaPaths = sync.OnceValue(func() []fieldPath {
	id := func(s string) string { return s }
	return append(schemaPaths(proxyConfigSchema, "", id, false), schemaPaths(proxyConfigSchema, "", id, true)...)
})

// FuzzProxyConfigField puts any value (JSON, or else a JSON string) in any
// field of the schema, nested where it belongs, and compares with the
// reference.
func FuzzProxyConfigField(f *testing.F) {
	paths := allSchemaPaths()
	for i, p := range paths {
		for _, v := range []string{`"1.5s"`, `15`, `"15"`, `1e2`, `true`, `"NONE"`, `{}`, `[]`, `null`, `{"a": "b"}`, `["x"]`, `"NaN"`, `-0.5`} {
			if i%7 == 0 || strings.Contains(p.name, "Duration") || strings.Contains(p.name, "Port") {
				f.Add(uint16(i), v)
			}
		}
	}
	f.Fuzz(func(t *testing.T, which uint16, value string) {
		p := paths[int(which)%len(paths)]
		raw := value
		if !json.Valid([]byte(raw)) {
			b, _ := json.Marshal(value)
			raw = string(b)
		}
		checkAgainstReference(t, p.doc(raw))
	})
}
