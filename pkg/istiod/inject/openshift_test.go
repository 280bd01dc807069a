package inject

import "testing"

// TestProxyIDs: OpenShift's namespace ranges give the proxy the top id of
// each; no lookup, an unknown namespace or a bad range leave 1337.
func TestProxyIDs(t *testing.T) {
	in := newInjector(t, "", "")
	if uid, gid := in.proxyIDs("a"); uid != 1337 || gid != 1337 {
		t.Errorf("without SetNamespaces: %d:%d, want 1337:1337", uid, gid)
	}
	ns := map[string]map[string]string{
		"slash":  {uidRangeAnnotation: "1000620000/10000", supplementalGroupsAnnotation: "2000/10,5000/5"},
		"dash":   {uidRangeAnnotation: "100-199"},
		"broken": {uidRangeAnnotation: "x", supplementalGroupsAnnotation: "7/0"},
	}
	in.SetNamespaces(func(n string) (map[string]string, bool) { a, ok := ns[n]; return a, ok })
	for _, tc := range []struct {
		ns       string
		uid, gid int64
	}{
		{"slash", 1000629999, 2009},
		{"dash", 199, 199},
		{"broken", 1337, 1337},
		{"unknown", 1337, 1337},
	} {
		if uid, gid := in.proxyIDs(tc.ns); uid != tc.uid || gid != tc.gid {
			t.Errorf("%s: %d:%d, want %d:%d", tc.ns, uid, gid, tc.uid, tc.gid)
		}
	}
}
