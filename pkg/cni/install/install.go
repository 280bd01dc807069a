package install

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skiff-mesh/skiff/pkg/atomicfile"
	"github.com/skiff-mesh/skiff/pkg/cni"
)

// Config is what the installer needs to know about the node.
type Config struct {
	NetDir       string // CNI configuration dir (/etc/cni/net.d)
	BinDir       string // CNI plugin dir (/opt/cni/bin)
	AgentRunDir  string // where the plugin's kubeconfig goes (/var/run/istio-cni)
	PluginSource string // the plugin binary to install
	// LookupSource is the plugin's API-server helper (cni.LookupBinary)
	// to install beside it; New sets it to the file of that name beside
	// PluginSource when empty.
	LookupSource string
	// Service-account credentials and the API server address for the kubeconfig.
	TokenPath string
	CAPath    string
	KubeHost  string
	KubePort  uint16
	// KubeCAFile, when set, is the CA the kubeconfig trusts instead of
	// CAPath (Istio's KUBE_CA_FILE); SkipTLSVerify writes no CA and has the
	// plugin skip the API server's certificate check (SKIP_TLS_VERIFY).
	KubeCAFile    string
	SkipTLSVerify bool
	// KubeconfigMode is the kubeconfig's file mode (KUBECONFIG_MODE, 0600).
	KubeconfigMode os.FileMode
	// Entry is our plugin's entry in the conflist; New sets its type to
	// istio-cni and, when empty, its cni_agent_run_dir to AgentRunDir.
	Entry cni.Config
	// MaxRewrites within RewriteWindow, beyond which the installer backs off
	// and warns that another component keeps rewriting the configuration.
	MaxRewrites   int
	RewriteWindow time.Duration
}

// DefaultKubeconfigMode is the kubeconfig's file mode unless
// KUBECONFIG_MODE says otherwise, as in Istio.
const DefaultKubeconfigMode os.FileMode = 0o600

// Installer installs and guards the plugin. Ready reports whether everything is in place.
type Installer struct {
	cfg      Config
	log      *slog.Logger
	ready    atomic.Bool
	rewrites []time.Time
	// Repairs counts configuration rewrites after the first install.
	Repairs atomic.Int64
	// Tests' hooks, called on Run's goroutine when set: after each install
	// pass with its result, and when the installer backs off.
	passed    func(error)
	throttled func(wait time.Duration)
}

// New checks the configuration and returns an Installer.
func New(cfg Config, log *slog.Logger) (*Installer, error) {
	for name, v := range map[string]string{"net dir": cfg.NetDir, "bin dir": cfg.BinDir, "agent run dir": cfg.AgentRunDir, "plugin binary": cfg.PluginSource} {
		if v == "" {
			return nil, fmt.Errorf("install: %s not set", name)
		}
	}
	cfg.Entry.Type = PluginType
	if cfg.LookupSource == "" {
		cfg.LookupSource = filepath.Join(filepath.Dir(cfg.PluginSource), cni.LookupBinary)
	}
	if cfg.Entry.AgentRunDir == "" {
		cfg.Entry.AgentRunDir = cfg.AgentRunDir
	}
	if cfg.MaxRewrites == 0 {
		cfg.MaxRewrites = 10
	}
	if cfg.RewriteWindow == 0 {
		cfg.RewriteWindow = time.Minute
	}
	return &Installer{cfg: cfg, log: log.With("component", "install-cni")}, nil
}

// Ready reports whether the binaries, kubeconfig and conflist entry are installed.
func (in *Installer) Ready() bool { return in.ready.Load() }

// Run installs, then watches the bin dir, the net dir and the token and
// repairs what another component changes, until ctx ends; then it removes
// its entry, binaries and kubeconfig.
func (in *Installer) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer w.Close()
	for _, d := range []string{in.cfg.NetDir, in.cfg.BinDir, filepath.Dir(in.cfg.TokenPath)} {
		if d == "." || d == "" {
			continue
		}
		if err := w.Add(d); err != nil {
			return fmt.Errorf("watch %s: %w", d, err)
		}
	}
	if err := in.installAll(); err != nil {
		in.log.Warn("install incomplete, waiting for changes", "err", err)
	}
	tick := time.NewTicker(30 * time.Second) // a safety net for missed events
	defer tick.Stop()
	var pending <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			in.ready.Store(false)
			return in.Uninstall()
		case ev := <-w.Events:
			in.log.Debug("file event", "path", ev.Name, "op", ev.Op.String())
			if pending == nil {
				pending = time.After(100 * time.Millisecond) // let bursts of writes settle
			}
		case err := <-w.Errors:
			in.log.Warn("watch error", "err", err)
		case <-tick.C:
			pending = time.After(0)
		case <-pending:
			pending = nil
			if wait := in.throttle(); wait > 0 {
				pending = time.After(wait)
				continue
			}
			if err := in.installAll(); err != nil {
				in.log.Warn("repair failed", "err", err)
			}
		}
	}
}

// throttle returns how long to wait before the next rewrite when too many happened recently.
func (in *Installer) throttle() time.Duration {
	now := time.Now()
	cut := 0
	for cut < len(in.rewrites) && now.Sub(in.rewrites[cut]) > in.cfg.RewriteWindow {
		cut++
	}
	in.rewrites = in.rewrites[cut:]
	if len(in.rewrites) < in.cfg.MaxRewrites {
		return 0
	}
	wait := in.cfg.RewriteWindow - now.Sub(in.rewrites[0])
	in.log.Warn("the CNI configuration keeps being rewritten by another component (another CNI installer, Multus or Cilium?); "+
		"backing off: configure it to leave our chained entry in place, or chain it yourself",
		"rewrites", len(in.rewrites), "window", in.cfg.RewriteWindow, "retry_in", wait)
	if in.throttled != nil {
		in.throttled(wait)
	}
	return wait
}

// installAll makes every installed file right, touching only what is wrong.
func (in *Installer) installAll() error {
	err := errors.Join(in.installBinary(in.cfg.PluginSource, PluginType), in.installBinary(in.cfg.LookupSource, cni.LookupBinary),
		in.installKubeconfig(), in.installEntry())
	in.ready.Store(err == nil)
	if in.passed != nil {
		in.passed(err)
	}
	return err
}

// installBinary installs the file src as name in the bin dir, unless it is
// there already.
func (in *Installer) installBinary(src, name string) error {
	dst := filepath.Join(in.cfg.BinDir, name)
	want, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read %s binary: %w", name, err)
	}
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := atomicfile.Write(dst, want, 0o755); err != nil {
		return err
	}
	in.log.Info("binary installed", "path", dst)
	return nil
}

// Kubeconfig renders the plugin's kubeconfig from the service-account token and CA.
func (in *Installer) Kubeconfig() ([]byte, error) {
	token, err := os.ReadFile(in.cfg.TokenPath)
	if err != nil {
		return nil, fmt.Errorf("read service account token: %w", err)
	}
	trust := "insecure-skip-tls-verify: true"
	if !in.cfg.SkipTLSVerify {
		path, what := in.cfg.CAPath, "service account CA"
		if in.cfg.KubeCAFile != "" {
			path, what = in.cfg.KubeCAFile, "KUBE_CA_FILE"
		}
		ca, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		trust = "certificate-authority-data: " + base64.StdEncoding.EncodeToString(ca)
	}
	server := "https://" + net.JoinHostPort(in.cfg.KubeHost, strconv.Itoa(int(in.cfg.KubePort)))
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    %s
users:
- name: istio-cni
  user:
    token: %s
contexts:
- name: istio-cni-context
  context:
    cluster: local
    user: istio-cni
current-context: istio-cni-context
`, server, trust, bytes.TrimSpace(token)), nil
}

func (in *Installer) installKubeconfig() error {
	want, err := in.Kubeconfig()
	if err != nil {
		return err
	}
	path := filepath.Join(in.cfg.AgentRunDir, cni.KubeconfigName)
	mode := in.cfg.KubeconfigMode
	if mode == 0 {
		mode = DefaultKubeconfigMode
	}
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) && fileMode(path) == mode {
		return nil
	}
	if err := os.MkdirAll(in.cfg.AgentRunDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", in.cfg.AgentRunDir, err)
	}
	if err := atomicfile.Write(path, want, mode); err != nil {
		return err
	}
	in.log.Info("kubeconfig written", "path", path)
	return nil
}

func (in *Installer) installEntry() error {
	path, err := FindConfFile(in.cfg.NetDir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	reason := Check(data, in.cfg.Entry)
	if reason == "" && path == ConflistPath(path) {
		return nil
	}
	out, err := Insert(data, in.cfg.Entry)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dst := ConflistPath(path)
	mode := fileMode(path)
	if err := in.recordOrigin(path, data, mode, dst, out); err != nil {
		return err
	}
	if err := atomicfile.Write(dst, out, mode); err != nil {
		return err
	}
	if dst != path {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("replace %s with %s: %w", path, dst, err)
		}
	}
	if in.ready.Load() || len(in.rewrites) > 0 {
		in.Repairs.Add(1)
	}
	in.rewrites = append(in.rewrites, time.Now())
	in.log.Info("plugin chained into the CNI configuration", "path", dst, "why", reason)
	return nil
}

// Uninstall removes our conflist entry, the binaries and the kubeconfig. The
// node's CNI configuration is left as the installer found it, byte for
// byte, when nobody else changed it meanwhile; otherwise only our entry is
// cut from it.
func (in *Installer) Uninstall() error {
	var errs []error
	o, recorded := in.loadOrigin()
	var paths []string
	if path, err := FindConfFile(in.cfg.NetDir); err == nil {
		paths = append(paths, path)
	}
	if recorded && !slices.Contains(paths, o.Conflist) {
		paths = append(paths, o.Conflist)
	}
	for _, p := range paths {
		errs = append(errs, in.unchain(p, o, recorded))
	}
	for _, p := range []string{filepath.Join(in.cfg.BinDir, PluginType), filepath.Join(in.cfg.BinDir, cni.LookupBinary),
		filepath.Join(in.cfg.AgentRunDir, cni.KubeconfigName), in.originPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	in.log.Info("uninstalled")
	return errors.Join(errs...)
}
