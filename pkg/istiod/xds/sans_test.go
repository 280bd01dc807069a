package xds_test

import (
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

const ratingsHost = "ratings.default.svc.cluster.local"

// ratingsVM is examples/mesh's ratings-vm WorkloadEntry with service account sa.
func ratingsVM(sa string) string {
	return `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ratings-vm, namespace: default}
spec:
  address: 127.0.0.22
  labels: {app: ratings, version: v2}
  serviceAccount: ` + sa + `
  locality: us-east/zone-b
`
}

// clusterSANs returns the SANs the named cluster's mTLS contexts check.
func clusterSANs(t *testing.T, r *discoveryv3.DiscoveryResponse, name string) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if c.GetName() != name {
			continue
		}
		for _, m := range c.GetTransportSocketMatches() {
			var u tlsv3.UpstreamTlsContext
			if err := m.GetTransportSocket().GetTypedConfig().UnmarshalTo(&u); err != nil {
				continue
			}
			for _, s := range u.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchSubjectAltNames() {
				if !slices.Contains(out, s.GetExact()) {
					out = append(out, s.GetExact())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestWorkloadEntryServiceAccountReachesCDS: when a WorkloadEntry changes
// only its service account, clients get new clusters whose SANs name it,
// or their mTLS would refuse the workload's new identity.
func TestWorkloadEntryServiceAccountReachesCDS(t *testing.T) {
	e := newEnv(t)
	c := e.sotw(t, productpage, nil)
	must(t, c.Request(gen.ClusterType, nil, "", "", nil))
	cds := recv(t, c)
	must(t, c.Ack(cds, nil))
	name := model.ClusterName(9080, "", ratingsHost)
	before := clusterSANs(t, cds, name)
	if !slices.Contains(before, "spiffe://cluster.local/ns/default/sa/ratings") {
		t.Fatalf("ratings SANs %v, want sa/ratings among them", before)
	}

	e.push(t, e.with(t, ratingsVM("ratings-vm")))
	r := recv(t, c)
	if r.GetTypeUrl() != gen.ClusterType {
		t.Fatalf("the service account change pushed %s first, want CDS", gen.ShortName(r.GetTypeUrl()))
	}
	after := clusterSANs(t, r, name)
	if !slices.Contains(after, "spiffe://cluster.local/ns/default/sa/ratings-vm") {
		t.Errorf("ratings SANs after the change %v, want sa/ratings-vm (before: %s)", after, strings.Join(before, " "))
	}
}
