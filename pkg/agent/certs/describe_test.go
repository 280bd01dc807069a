package certs_test

import (
	"crypto/x509/pkix"
	"encoding/json"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-mesh/skiff/pkg/agent/certs"
	"github.com/skiff-mesh/skiff/pkg/pki"
)

// TestDescribeJSON pins the agent's /debug/certs: istioctl decodes it with a
// type of its own (proxyview.Secret, whose test reads the same field names).
func TestDescribeJSON(t *testing.T) {
	now := time.Now()
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	root, err := pki.NewRoot(key, pkix.Name{CommonName: "root"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.NewBundle(root)
	if err != nil {
		t.Fatal(err)
	}
	is, err := pki.NewIssuer(root, key, nil, roots, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := is.Issue(key.Public(), pki.LeafOptions{URIs: []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/default/sa/x"}},
		NotBefore: now, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal((&certs.Cert{Leaf: leaf, RootPEM: pki.EncodeCertificates(root)}).Describe(now))
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	fields := []string{"name", "not_after", "not_before", "serial", "type", "valid"}
	for i, want := range []struct{ name, typ, serial string }{
		{"default", "Cert Chain", leaf.SerialNumber.Text(16)},
		{"ROOTCA", "CA", root.SerialNumber.Text(16)},
	} {
		if i >= len(got) {
			t.Fatalf("/debug/certs %s: %d entries", js, len(got))
		}
		var keys []string
		for k := range got[i] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if diff := cmp.Diff(fields, keys); diff != "" {
			t.Errorf("entry %d fields (-want +got):\n%s", i, diff)
		}
		if got[i]["name"] != want.name || got[i]["type"] != want.typ || got[i]["serial"] != want.serial || got[i]["valid"] != true {
			t.Errorf("entry %d: %v, want %+v", i, got[i], want)
		}
	}
}
