package install

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/skiff-mesh/skiff/pkg/cni"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const bridgeConf = `{"cniVersion":"1.0.0","name":"k8s","type":"bridge","bridge":"cni0","ipam":{"type":"host-local","subnet":"10.1.0.0/16"}}`

func entry() cni.Config {
	c := cni.Config{AgentRunDir: "/var/run/istio-cni", ExcludeNamespaces: []string{"kube-system"}}
	c.Type = PluginType
	return c
}

func TestConflistEdits(t *testing.T) {
	out, err := Insert([]byte(bridgeConf), entry())
	if err != nil {
		t.Fatal(err)
	}
	if r := Check(out, entry()); r != "" {
		t.Fatalf("after Insert: %s", r)
	}
	var c map[string]any
	_ = json.Unmarshal(out, &c)
	if c["name"] != "k8s" || len(c["plugins"].([]any)) != 2 || c["plugins"].([]any)[0].(map[string]any)["bridge"] != "cni0" {
		t.Errorf(".conf not wrapped faithfully:\n%s", out)
	}
	twice, _ := Insert(out, entry())
	if r := Check(twice, entry()); r != "" {
		t.Errorf("Insert twice: %s", r)
	}
	mangled := strings.Replace(string(out), "/var/run/istio-cni", "/tmp/elsewhere", 1)
	if r := Check([]byte(mangled), entry()); r != "our plugin entry was changed" {
		t.Errorf("mangled entry: %q", r)
	}
	dup := strings.Replace(string(out), `"plugins": [`, `"plugins": [{"type":"istio-cni"},`, 1)
	if r := Check([]byte(dup), entry()); !strings.Contains(r, "2 times") {
		t.Errorf("duplicate entry: %q", r)
	}
	removed, had, err := Remove(out)
	if err != nil || !had || Check(removed, entry()) != "our plugin entry is missing" {
		t.Errorf("Remove: had=%v err=%v\n%s", had, err, removed)
	}
	for _, bad := range []string{`{`, `{"plugins":3}`, `{"name":"x"}`, `{"plugins":[],"plugins":[]}`, `{"plugins":[]} {}`, `[]`} {
		if _, err := Insert([]byte(bad), entry()); err == nil {
			t.Errorf("Insert(%s) succeeded", bad)
		}
	}
}

// tree is a fake node: a CNI net dir and bin dir, a service-account token and CA.
type tree struct {
	cfg  Config
	conf string // the runtime's chosen file, as a conflist
}

func newTree(t *testing.T) *tree {
	d := t.TempDir()
	cfg := Config{
		NetDir: filepath.Join(d, "net.d"), BinDir: filepath.Join(d, "bin"), AgentRunDir: filepath.Join(d, "run"),
		PluginSource: filepath.Join(d, "plugin"), TokenPath: filepath.Join(d, "sa", "token"), CAPath: filepath.Join(d, "sa", "ca.crt"),
		KubeHost: "10.0.0.1", KubePort: 443, Entry: entry(), MaxRewrites: 5, RewriteWindow: 3 * time.Second,
	}
	for _, dir := range []string{cfg.NetDir, cfg.BinDir, filepath.Dir(cfg.TokenPath)} {
		must(t, os.MkdirAll(dir, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(cfg.NetDir, "10-bridge.conf"), []byte(bridgeConf), 0o644))
	must(t, os.WriteFile(filepath.Join(cfg.NetDir, "99-other.conflist"), []byte(`{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"ptp"}]}`), 0o644))
	must(t, os.WriteFile(cfg.PluginSource, []byte("#!/bin/true\nplugin v1"), 0o755))
	must(t, os.WriteFile(filepath.Join(d, cni.LookupBinary), []byte("#!/bin/true\nlookup v1"), 0o755))
	must(t, os.WriteFile(cfg.TokenPath, []byte("token-1\n"), 0o600))
	must(t, os.WriteFile(cfg.CAPath, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	return &tree{cfg: cfg, conf: filepath.Join(cfg.NetDir, "10-bridge.conflist")}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// running is an Installer under test with its events.
type running struct {
	*Installer
	passes    chan error         // each install pass's result
	throttles chan time.Duration // each back-off
	stop      func()
}

// run starts the installer until the test ends (or stop is called).
func (tr *tree) run(t *testing.T) *running {
	in, err := New(tr.cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	must(t, err)
	r := &running{Installer: in, passes: make(chan error, 1000), throttles: make(chan time.Duration, 1000)}
	// Sends never block Run: a test reads the events it waits for.
	in.passed = func(err error) {
		select {
		case r.passes <- err:
		default:
		}
	}
	in.throttled = func(d time.Duration) {
		select {
		case r.throttles <- d:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	r.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			r.stop()
		}
	})
	return r
}

// start is run, then waits until the installer is ready.
func (tr *tree) start(t *testing.T) (*Installer, func()) {
	r := tr.run(t)
	polltest.Until(t, "ready", r.Ready)
	return r.Installer, r.stop
}

// next waits for the installer's next event of one kind.
func next[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(polltest.Timeout):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func (tr *tree) intact() bool {
	b, err := os.ReadFile(tr.conf)
	return err == nil && Check(b, tr.cfg.Entry) == ""
}

func TestInstallRepairAndUninstall(t *testing.T) {
	tr := newTree(t)
	in, stop := tr.start(t)
	if want := filepath.Join(filepath.Dir(tr.cfg.PluginSource), cni.LookupBinary); in.cfg.LookupSource != want {
		t.Errorf("lookup helper from %s, want %s beside the plugin", in.cfg.LookupSource, want)
	}

	if !tr.intact() {
		t.Fatal("entry not installed")
	}
	if _, err := os.Stat(filepath.Join(tr.cfg.NetDir, "10-bridge.conf")); !os.IsNotExist(err) {
		t.Error("the .conf was not replaced by its .conflist")
	}
	st, err := os.Stat(filepath.Join(tr.cfg.BinDir, PluginType))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("plugin binary: %v %v", st, err)
	}
	kc := filepath.Join(tr.cfg.AgentRunDir, "istio-cni-kubeconfig")
	st, err = os.Stat(kc)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig: %v %v", st, err)
	}
	if b, _ := os.ReadFile(kc); !strings.Contains(string(b), "token: token-1") || !strings.Contains(string(b), "server: https://10.0.0.1:443") {
		t.Errorf("kubeconfig:\n%s", b)
	}

	// Another component rewrites the file without us.
	must(t, os.WriteFile(tr.conf, []byte(bridgeConf), 0o644))
	polltest.Until(t, "repair of a removed entry", tr.intact)
	// A mangled entry: same type, other settings.
	b, _ := os.ReadFile(tr.conf)
	must(t, os.WriteFile(tr.conf, []byte(strings.Replace(string(b), "kube-system", "default", 1)), 0o644))
	polltest.Until(t, "repair of a mangled entry", tr.intact)
	// A duplicated entry.
	b, _ = os.ReadFile(tr.conf)
	must(t, os.WriteFile(tr.conf, []byte(strings.Replace(string(b), `"plugins": [`, `"plugins": [{"type":"istio-cni"},`, 1)), 0o644))
	polltest.Until(t, "repair of a duplicated entry", tr.intact)
	// The binaries are replaced by something else, or removed.
	must(t, os.WriteFile(filepath.Join(tr.cfg.BinDir, PluginType), []byte("junk"), 0o755))
	must(t, os.Remove(filepath.Join(tr.cfg.BinDir, cni.LookupBinary)))
	polltest.Until(t, "binaries restored", func() bool {
		b, _ := os.ReadFile(filepath.Join(tr.cfg.BinDir, PluginType))
		l, _ := os.ReadFile(filepath.Join(tr.cfg.BinDir, cni.LookupBinary))
		return string(b) == "#!/bin/true\nplugin v1" && string(l) == "#!/bin/true\nlookup v1"
	})
	// Token rotation.
	must(t, os.WriteFile(tr.cfg.TokenPath, []byte("token-2\n"), 0o600))
	polltest.Until(t, "kubeconfig rewritten for the new token", func() bool {
		b, _ := os.ReadFile(kc)
		return strings.Contains(string(b), "token: token-2")
	})
	if in.Repairs.Load() < 3 {
		t.Errorf("repairs = %d, want at least 3", in.Repairs.Load())
	}

	// Health.
	rec := httptest.NewRecorder()
	in.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Errorf("/readyz = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	in.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "istio_cni_install_ready 1") {
		t.Errorf("metrics:\n%s", rec.Body)
	}

	stop()
	b, _ = os.ReadFile(tr.conf)
	if r := Check(b, tr.cfg.Entry); r != "our plugin entry is missing" {
		t.Errorf("after stop: %q\n%s", r, b)
	}
	if !strings.Contains(string(b), `"cni0"`) {
		t.Errorf("the bridge entry did not survive uninstall:\n%s", b)
	}
	for _, p := range []string{filepath.Join(tr.cfg.BinDir, PluginType), filepath.Join(tr.cfg.BinDir, cni.LookupBinary), kc} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind", p)
		}
	}
	if other, _ := os.ReadFile(filepath.Join(tr.cfg.NetDir, "99-other.conflist")); strings.Contains(string(other), PluginType) {
		t.Error("a file other than the first was touched")
	}
}

// TestThrottlesAFight: a component that keeps removing our entry gets at
// most MaxRewrites answers per window, not a write storm.
func TestThrottlesAFight(t *testing.T) {
	tr := newTree(t)
	r := tr.run(t)
	polltest.Until(t, "ready", r.Ready)
	// Remove the entry each time the installer has put it back, until it
	// backs off.
	for fights := 0; ; fights++ {
		if tr.intact() {
			must(t, os.WriteFile(tr.conf, []byte(bridgeConf), 0o644))
		}
		select {
		case <-r.throttles:
		case <-r.passes:
			if fights > 10*tr.cfg.MaxRewrites {
				t.Fatalf("%d passes and the installer never backed off (%d repairs)", fights, r.Repairs.Load())
			}
			continue
		case <-time.After(polltest.Timeout):
			t.Fatal("timed out waiting for a repair or a back-off")
		}
		break
	}
	if n := r.Repairs.Load(); n > int64(tr.cfg.MaxRewrites) {
		t.Errorf("%d rewrites before backing off, want at most %d", n, tr.cfg.MaxRewrites)
	}
	polltest.Until(t, "repair after the fight", tr.intact)
}

func TestWaitsForAConfiguration(t *testing.T) {
	tr := newTree(t)
	for _, f := range []string{"10-bridge.conf", "99-other.conflist"} {
		must(t, os.Remove(filepath.Join(tr.cfg.NetDir, f)))
	}
	r := tr.run(t)
	if err := next(t, "the first install pass", r.passes); err == nil || !strings.Contains(err.Error(), "no CNI configuration") {
		t.Errorf("first pass with an empty net dir: %v", err)
	}
	if r.Ready() {
		t.Error("ready with no CNI configuration on the node")
	}
	must(t, os.WriteFile(filepath.Join(tr.cfg.NetDir, "05-primary.conflist"), []byte(`{"cniVersion":"1.0.0","name":"p","plugins":[{"type":"ptp"}]}`), 0o644))
	polltest.Until(t, "install once the primary plugin writes its configuration", r.Ready)
	r.stop()
}
