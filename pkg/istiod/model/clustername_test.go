package model_test

import (
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

func TestParseClusterName(t *testing.T) {
	for _, tc := range []struct {
		name         string
		port         uint16
		subset, host string
		ok           bool
	}{
		{name: "outbound|9080||reviews.default.svc.cluster.local", port: 9080, host: "reviews.default.svc.cluster.local", ok: true},
		{name: "outbound|9080|v1|reviews.default.svc.cluster.local", port: 9080, subset: "v1", host: "reviews.default.svc.cluster.local", ok: true},
		{name: "outbound|53||a|b", port: 53, host: "a|b", ok: true}, // the host is the rest
		{name: "outbound|9080|v1"},
		{name: "outbound|0||h"},
		{name: "outbound|65536||h"},
		{name: "outbound|x||h"},
		{name: "inbound|9080||"},
		{name: "outbound"},
		{name: ""},
	} {
		port, subset, host, ok := model.ParseClusterName(tc.name)
		if port != tc.port || subset != tc.subset || host != tc.host || ok != tc.ok {
			t.Errorf("ParseClusterName(%q) = %d, %q, %q, %t; want %d, %q, %q, %t", tc.name, port, subset, host, ok, tc.port, tc.subset, tc.host, tc.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { model.ParseClusterName("outbound|9080|v1|reviews.default.svc.cluster.local") }); n != 0 {
		t.Errorf("ParseClusterName allocates %v times; EDS looks up every named cluster with it", n)
	}
}

// FuzzParseClusterName: any name (proxies send them) parses without a
// panic, and a cluster's name parses back to what named it.
func FuzzParseClusterName(f *testing.F) {
	f.Add(uint16(9080), "v1", "reviews.default.svc.cluster.local", "outbound|9080|v1|x")
	f.Add(uint16(53), "", "a|b", "outbound|053||")
	f.Fuzz(func(t *testing.T, port uint16, subset, host, any string) {
		model.ParseClusterName(any)
		if port == 0 || strings.Contains(subset, "|") {
			return
		}
		name := model.ClusterName(port, subset, host)
		p, s, h, ok := model.ParseClusterName(name)
		if !ok || p != port || s != subset || h != host {
			t.Fatalf("%q parsed as %d, %q, %q, %t", name, p, s, h, ok)
		}
	})
}
