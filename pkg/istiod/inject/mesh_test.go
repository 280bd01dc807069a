package inject

import "testing"

// TestSetMesh: the mesh config reaches the templates (trust domain, proxy
// metadata), survives a later Update, and a bad one is refused and leaves
// the current one.
func TestSetMesh(t *testing.T) {
	in := newInjector(t, "", "")
	env := func() map[string]string {
		t.Helper()
		res, err := in.Inject(appPod(), "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range sidecar(res.Pod).Env {
			out[e.Name] = e.Value
		}
		return out
	}
	if got := env()["TRUST_DOMAIN"]; got != "cluster.local" {
		t.Fatalf("TRUST_DOMAIN %q before SetMesh", got)
	}
	if err := in.SetMesh([]byte("trustDomain: example.org\ndefaultConfig:\n  proxyMetadata: {FOO: bar}\n")); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		e := env()
		if e["TRUST_DOMAIN"] != "example.org" || e["FOO"] != "bar" {
			t.Errorf("%s: TRUST_DOMAIN %q FOO %q, want example.org bar", when, e["TRUST_DOMAIN"], e["FOO"])
		}
	}
	check("after SetMesh")
	if err := in.Update(in.Config()); err != nil {
		t.Fatal(err)
	}
	check("after Update")
	if err := in.SetMesh([]byte("defaultConfig: {statusPort: nope}")); err == nil {
		t.Error("SetMesh accepted statusPort: nope")
	}
	check("after a bad SetMesh")
	if err := in.SetMesh(nil); err != nil {
		t.Fatal(err)
	}
	if got := env()["TRUST_DOMAIN"]; got != "cluster.local" {
		t.Errorf("after SetMesh(nil): TRUST_DOMAIN %q, want cluster.local", got)
	}
}
