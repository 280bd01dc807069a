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

// TestNativeSidecars: SetNativeSidecars puts istio-proxy among the init
// containers (restartPolicy Always) and holds across Update; the pod's
// sidecar.istio.io/nativeSidecar=false wins.
func TestNativeSidecars(t *testing.T) {
	in := newInjector(t, "", "")
	in.SetNativeSidecars(true)
	if err := in.Update(in.Config()); err != nil {
		t.Fatal(err)
	}
	res, err := in.Inject(appPod(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range res.Pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	p := sidecar(res.Pod)
	if len(names) != 2 || names[0] != "istio-init" || names[1] != "istio-proxy" || p.RestartPolicy == nil || *p.RestartPolicy != "Always" {
		t.Errorf("init containers %v (restartPolicy %v), want istio-init, istio-proxy (Always)", names, p.RestartPolicy)
	}
	pod := appPod()
	annotate("sidecar.istio.io/nativeSidecar", "false")(pod)
	if res, err = in.Inject(pod, ""); err != nil {
		t.Fatal(err)
	}
	if len(res.Pod.Spec.InitContainers) != 1 || res.Pod.Spec.Containers[len(res.Pod.Spec.Containers)-1].Name != "istio-proxy" {
		t.Errorf("nativeSidecar=false: istio-proxy not the last container")
	}
}
