package gen_test

import (
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/skiff-mesh/skiff/pkg/agent/bootstrap"
	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/agent/sds"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// fixedCert is an SDS source holding one certificate.
type fixedCert struct{ c *certs.Cert }

func (f fixedCert) Current() *certs.Cert { return f.c }
func (f fixedCert) Subscribe() (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}

// bootstrapClusters are the static clusters of the agent's Envoy bootstrap.
func bootstrapClusters(t *testing.T) []string {
	t.Helper()
	b, err := (&bootstrap.Envoy{Node: bootstrap.Node{ID: "sidecar~127.0.0.1~a.default~default.svc.cluster.local"}}).JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		StaticResources struct {
			Clusters []struct {
				Name string `json:"name"`
			} `json:"clusters"`
		} `json:"static_resources"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range doc.StaticResources.Clusters {
		out = append(out, c.Name)
	}
	return out
}

// TestClusterSecretsServedByAgent cross-checks every SDS secret an Envoy
// cluster of any case names against the agent: the SDS cluster must be a
// static cluster of the agent's bootstrap, and the agent's real SDS server
// must answer for the secret. Secrets of mounted files (file-cert:CERT~KEY,
// file-root:CA, as Istio's agent names them) must be well formed; the
// agent does not serve them yet, which the test states.
func TestClusterSecretsServedByAgent(t *testing.T) {
	srv := sds.New(fixedCert{&certs.Cert{KeyPEM: []byte("key"), ChainPEM: []byte("chain"), RootPEM: []byte("root"),
		Leaf: &x509.Certificate{SerialNumber: big.NewInt(1)}}}, slogDiscard())
	static := bootstrapClusters(t)
	seen := map[string]bool{}
	for _, tc := range clusterCases {
		var docs []string
		if tc.rule != "" {
			docs = append(docs, tc.rule)
		}
		pc := model.BuildPushContext(echoInputs(t, docs...), "v1")
		for _, c := range decodeClusters(t, echoClusters(t, pc, envoyEcho)) {
			for _, u := range upstreamContexts(t, c) {
				var secrets []*tlsSecret
				for _, s := range collectSecrets(u) {
					secrets = append(secrets, &tlsSecret{name: s.GetName(), cluster: s.GetSdsConfig().GetApiConfigSource().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()})
				}
				for _, s := range secrets {
					if !slices.Contains(static, s.cluster) {
						t.Errorf("%s: %s: secret %q from cluster %q, not one of the bootstrap's %v", tc.name, c.GetName(), s.name, s.cluster, static)
					}
					seen[s.name] = true
				}
			}
		}
	}
	var unserved []string
	for name := range seen {
		switch {
		case strings.HasPrefix(name, "file-cert:"):
			if cert, key, ok := strings.Cut(strings.TrimPrefix(name, "file-cert:"), "~"); !ok || cert == "" || key == "" {
				t.Errorf("secret %q: want file-cert:CERT~KEY", name)
			}
			unserved = append(unserved, name)
		case strings.HasPrefix(name, "file-root:"):
			if strings.TrimPrefix(name, "file-root:") == "" {
				t.Errorf("secret %q: want file-root:CA", name)
			}
			unserved = append(unserved, name)
		default:
			if _, err := srv.Fetch([]string{name}); err != nil {
				t.Errorf("secret %q: the agent's SDS server refuses it: %v", name, err)
			}
		}
	}
	if !seen[sds.WorkloadCert] || !seen[sds.RootCert] {
		t.Errorf("secrets named %v: want %s and %s among them", seen, sds.WorkloadCert, sds.RootCert)
	}
	slices.Sort(unserved)
	t.Logf("mounted-file secrets the agent does not serve yet: %v", unserved)
}

type tlsSecret struct{ name, cluster string }

func collectSecrets(u *tlsv3.UpstreamTlsContext) []*tlsv3.SdsSecretConfig {
	var out []*tlsv3.SdsSecretConfig
	sdsSecrets(u.ProtoReflect(), &out)
	return out
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
