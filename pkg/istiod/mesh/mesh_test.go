package mesh_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/istiod/mesh"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		check     func(*meshconfig.MeshConfig) bool
		warning   string
		err       string
	}{
		{name: "empty is the defaults", doc: "",
			check: func(m *meshconfig.MeshConfig) bool { return proto.Equal(m, mesh.Default()) }},
		{name: "trust domain and root namespace replace", doc: "trustDomain: example.org\nrootNamespace: mesh-root\n",
			check: func(m *meshconfig.MeshConfig) bool {
				return m.GetTrustDomain() == "example.org" && m.GetRootNamespace() == "mesh-root" && m.GetEnableAutoMtls().GetValue()
			}},
		{name: "a false boolean is applied", doc: "enableAutoMtls: false\nenableTracing: false\n",
			check: func(m *meshconfig.MeshConfig) bool { return !m.GetEnableAutoMtls().GetValue() && !m.GetEnableTracing() }},
		{name: "outbound traffic policy", doc: "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
			check: func(m *meshconfig.MeshConfig) bool {
				return m.GetOutboundTrafficPolicy().GetMode() == meshconfig.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY
			}},
		{name: "defaultConfig is merged over the default proxy config", doc: "defaultConfig:\n  holdApplicationUntilProxyStarts: true\n  proxyMetadata: {ISTIO_META_DNS_CAPTURE: \"true\"}\n",
			check: func(m *meshconfig.MeshConfig) bool {
				pc := m.GetDefaultConfig()
				return pc.GetHoldApplicationUntilProxyStarts().GetValue() && pc.GetProxyMetadata()["ISTIO_META_DNS_CAPTURE"] == "true" &&
					pc.GetDiscoveryAddress() == "istiod.istio-system.svc:15012" && pc.GetStatusPort() == 15020
			}},
		{name: "defaultConfig's own fields replace", doc: "defaultConfig: {discoveryAddress: istiod.mesh.svc:15012}\n",
			check: func(m *meshconfig.MeshConfig) bool {
				return m.GetDefaultConfig().GetDiscoveryAddress() == "istiod.mesh.svc:15012" && m.GetDefaultConfig().GetProxyAdminPort() == 15000
			}},
		{name: "trust domain aliases add up", doc: "trustDomainAliases: [b.org, a.org]\n",
			check: func(m *meshconfig.MeshConfig) bool {
				return strings.Join(m.GetTrustDomainAliases(), ",") == "a.org,b.org"
			}},
		{name: "durations in Istio's spelling", doc: "connectTimeout: 5s\ndefaultConfig: {drainDuration: 10s}\n",
			check: func(m *meshconfig.MeshConfig) bool {
				return m.GetConnectTimeout().AsDuration().Seconds() == 5 && m.GetDefaultConfig().GetDrainDuration().AsDuration().Seconds() == 10
			}},
		{name: "an unknown field is a warning", doc: "trustDomain: x.org\nfutureField: 1\n", warning: "futureField: not a field",
			check: func(m *meshconfig.MeshConfig) bool { return m.GetTrustDomain() == "x.org" }},
		{name: "an unknown defaultConfig field is a warning", doc: "defaultConfig: {futureKnob: true}\n", warning: "defaultConfig.futureKnob"},
		{name: "a JSON access log format that is not an object is a warning", doc: "accessLogEncoding: JSON\naccessLogFormat: '[%START_TIME%]'\n",
			warning: "accessLogFormat: \"[%START_TIME%]\" is not a JSON object"},
		{name: "a JSON access log format", doc: "accessLogEncoding: JSON\naccessLogFormat: '{\"t\": \"%START_TIME%\"}'\n"},
		{name: "a wrong type names the field", doc: "outboundTrafficPolicy: {mode: SOMETIMES}\n", err: "outboundTrafficPolicy"},
		{name: "a wrong nested type names the field", doc: "defaultConfig: {statusPort: many}\n", err: "defaultConfig.statusPort"},
		{name: "not a mapping", doc: "- a\n- b\n", err: "want a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, warnings, err := mesh.Parse([]byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(warnings, "; "); (tc.warning == "") != (got == "") || !strings.Contains(got, tc.warning) {
				t.Errorf("warnings = %q, want %q", got, tc.warning)
			}
			if tc.check != nil && !tc.check(m) {
				t.Errorf("unexpected config: %v", m)
			}
		})
	}
}

func TestParseLeavesDefaultsAlone(t *testing.T) {
	if _, _, err := mesh.Parse([]byte("trustDomain: x.org\ndefaultConfig: {statusPort: 1}\n")); err != nil {
		t.Fatal(err)
	}
	if d := mesh.Default(); d.GetTrustDomain() != "cluster.local" || d.GetDefaultConfig().GetStatusPort() != 15020 {
		t.Fatalf("Default changed by Parse: %v", d)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "trustDomain: a\n", "defaultConfig: {statusPort: 1}\n", "outboundTrafficPolicy: {mode: REGISTRY_ONLY}", "[1,2]", "enableAutoMtls: null"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, _, err := mesh.Parse(doc)
		if err == nil && m == nil {
			t.Fatal("nil config without an error")
		}
	})
}
