package config

import (
	"strings"
	"testing"
	"time"

	meshconfig "istio.io/api/mesh/v1alpha1"
)

func TestProxyConfigJSONAndYAML(t *testing.T) {
	for name, in := range map[string]string{
		"json": `{"discoveryAddress": "istiod.x.svc:15010", "controlPlaneAuthPolicy": "NONE", "drainDuration": "10s", "statusPort": 16020, "proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true"}, "concurrency": 2}`,
		"yaml": "discoveryAddress: istiod.x.svc:15010\ncontrolPlaneAuthPolicy: NONE\ndrainDuration: 10s\nstatusPort: 16020\nproxyMetadata:\n  ISTIO_META_DNS_CAPTURE: \"true\"\nconcurrency: 2\n",
	} {
		t.Run(name, func(t *testing.T) {
			pc, err := ProxyConfig(in)
			if err != nil {
				t.Fatal(err)
			}
			if pc.DiscoveryAddress != "istiod.x.svc:15010" || pc.ControlPlaneAuthPolicy != meshconfig.AuthenticationPolicy_NONE ||
				pc.DrainDuration.AsDuration() != 10*time.Second || pc.StatusPort != 16020 || pc.Concurrency.GetValue() != 2 {
				t.Errorf("parsed %v", pc)
			}
			// Defaults survive where the input is silent.
			if pc.ProxyAdminPort != 15000 || pc.TerminationDrainDuration.AsDuration() != 5*time.Second {
				t.Errorf("defaults lost: %v", pc)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	c, err := Load([]string{
		"POD_NAME=reviews-v1-abc", "POD_NAMESPACE=default", "INSTANCE_IP=10.1.0.5", "SERVICE_ACCOUNT=reviews",
		`PROXY_CONFIG={"proxyMetadata": {"SECRET_TTL": "1h", "ISTIO_META_MESH_ID": "m1"}}`,
		"ISTIO_META_CLUSTER_ID=c1", "ECC_SIGNATURE_ALGORITHM=ECDSA", `ISTIO_METAJSON_LABELS={"app":"reviews"}`,
	}, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID() != "sidecar~10.1.0.5~reviews-v1-abc.default~default.svc.cluster.local" {
		t.Errorf("node id %s", c.NodeID())
	}
	if c.SecretTTL != time.Hour {
		t.Errorf("proxyMetadata did not act as env: SECRET_TTL %s", c.SecretTTL)
	}
	if !c.ECDSA || c.Plaintext || c.Metadata["MESH_ID"] != "m1" || c.Metadata["CLUSTER_ID"] != "c1" || c.Labels["app"] != "reviews" {
		t.Errorf("config %+v", c)
	}
	if c.CAAddr != DefaultAddress {
		t.Errorf("CA_ADDR default %s", c.CAAddr)
	}
}

func TestLoadRejects(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"PROXY_CONFIG={\"statusPort\": 70000}", "statusPort 70000"},
		{"PROXY_CONFIG={\"discoveryAddress\": \"nohostport\"}", "discoveryAddress"},
		{"PROXY_CONFIG={\"noSuchField\": 1}", "PROXY_CONFIG"},
		{"SECRET_GRACE_PERIOD_RATIO=1.5", "SECRET_GRACE_PERIOD_RATIO"},
		{"ECC_SIGNATURE_ALGORITHM=DSA", "ECC_SIGNATURE_ALGORITHM"},
		{"WORKLOAD_RSA_KEY_SIZE=1024", "WORKLOAD_RSA_KEY_SIZE"},
		{"FILE_MOUNTED_CERTS=perhaps", "FILE_MOUNTED_CERTS"},
		{"ISTIO_METAJSON_LABELS=[1]", "ISTIO_METAJSON_LABELS"},
		{`ISTIO_KUBE_APP_PROBERS={"/wrong": {"tcpSocket": {"port": 80}}}`, "ISTIO_KUBE_APP_PROBERS"},
		{`ISTIO_KUBE_APP_PROBERS={"/app-health/a/livez": {"tcpSocket": {"port": 80}, "grpc": {"port": 1}}}`, "exactly one"},
		{`ISTIO_PROMETHEUS_ANNOTATIONS={`, "ISTIO_PROMETHEUS_ANNOTATIONS"},
	} {
		_, err := Load([]string{tc.env}, "sidecar")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.env, err, tc.want)
		}
	}
	if _, err := Load(nil, "gateway"); err == nil {
		t.Error("proxy type gateway accepted")
	}
}
