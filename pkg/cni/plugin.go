package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/skiff-mesh/skiff/pkg/capture"
	"github.com/skiff-mesh/skiff/pkg/cni/pluginlog"
	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/logtime"
)

// Plugin implements the CNI commands. Its fields are the seams tests replace.
type Plugin struct {
	// Stdout receives the CNI result; logs never go there.
	Stdout io.Writer
	// Stderr receives logs.
	Stderr io.Writer
	// Fallback reads a pod the node agent's cache cannot give; nil runs
	// the LookupBinary helper beside the plugin.
	Fallback func(ctx context.Context, l Lookup) (*Pod, error)
	// Apply programs a namespace; nil uses capture.Run.
	Apply func(ctx context.Context, cfg *capture.Config, log *slog.Logger) error
}

// Funcs returns the commands for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status, GC: p.GC}
}

// Versions returns the CNI spec versions the plugin speaks.
func Versions() version.PluginInfo {
	return version.PluginSupports(slices.Clone(version.All.SupportedVersions())...)
}

// Time limits of one command, so that the plugin returns an error naming
// what hung before the runtime kills it (the kubelet's CRI calls give up
// after 2 minutes by default).
const (
	// captureTimeout bounds programming or checking a pod's namespace.
	captureTimeout = 30 * time.Second
	// helperStart is the helper's start-up, allowed on top of the
	// lookup's own time limit.
	helperStart = 2 * time.Second
)

// logger is the command's logger at conf's level, writing to Stderr and,
// when conf names one, a log file (left open until the process exits).
// With a node agent run dir, the records are also kept for done to ship
// to the node agent (pluginlog).
func (p *Plugin) logger(conf *Config) (*slog.Logger, *pluginlog.Buffer, error) {
	w := p.Stderr
	if conf.LogFile != "" {
		f, err := os.OpenFile(conf.LogFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, cniError(types.ErrIOFailure, "open log_file", err)
		}
		w = io.MultiWriter(w, f)
	}
	var h slog.Handler = slog.NewTextHandler(w, &slog.HandlerOptions{Level: conf.level, ReplaceAttr: logtime.UTC})
	var buf *pluginlog.Buffer
	if conf.AgentRunDir != "" {
		buf = pluginlog.NewBuffer(conf.level)
		h = slog.NewMultiHandler(h, buf)
	}
	return slog.New(h).With("component", "istio-cni"), buf, nil
}

// done ends a command that got as far as its configuration: it logs the
// command's error, if any, and ships the command's records to the node
// agent. Records that cannot be shipped are reported on Stderr; the
// command's outcome stays its own.
func (p *Plugin) done(t *target, cmd string, err error) {
	if err != nil {
		t.log.Error(cmd+" failed", "pod", t.pod, "err", err)
	}
	if t.buf == nil {
		return
	}
	if err := pluginlog.Ship(t.conf.AgentRunDir, t.buf.Records()); err != nil {
		fmt.Fprintln(p.Stderr, "istio-cni: shipping the plugin's log:", err)
	}
}

// cniError is a CNI error with a code, printed by skel as the error JSON.
func cniError(code uint, msg string, err error) *types.Error {
	return types.NewError(code, msg, err.Error())
}

// target is what ADD and CHECK work on: the pod, if it is to be captured.
type target struct {
	conf     *Config
	log      *slog.Logger
	buf      *pluginlog.Buffer // the records to ship, or nil
	decision Decision
	pod      string
}

// resolve parses the configuration and CNI_ARGS and decides about the pod.
// A nil decision.Capture means the pod is passed through. Once it has a
// logger it returns the target with any error, for done.
func (p *Plugin) resolve(args *skel.CmdArgs) (*target, error) {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return nil, err
	}
	log, buf, err := p.logger(conf)
	if err != nil {
		return nil, err
	}
	t := &target{conf: conf, log: log, buf: buf}
	pa, err := ParseArgs(args.Args)
	if err != nil {
		return t, cniError(types.ErrInvalidEnvironmentVariables, "bad CNI_ARGS", err)
	}
	name, ns := string(pa.K8S_POD_NAME), string(pa.K8S_POD_NAMESPACE)
	t.pod = ns + "/" + name
	switch {
	case name == "" || ns == "":
		t.decision.Reason = "no Kubernetes pod in CNI_ARGS"
		return t, nil
	case conf.excluded(ns):
		t.decision.Reason = "namespace " + ns + " is excluded"
		return t, nil
	case ns == conf.PodNamespace && strings.HasPrefix(name, "istio-cni-node-"):
		// Checked before any client exists: after a node reboot the
		// kubeconfig may not be written yet, and waiting for it would deadlock.
		t.decision.Reason = "the CNI node agent's own pod"
		return t, nil
	}
	start := time.Now()
	pod, err := p.lookup(conf, t.log, ns, name, string(pa.K8S_POD_UID))
	if err != nil {
		return t, err
	}
	t.log.Debug("pod looked up", "pod", t.pod, "took", time.Since(start))
	if t.decision, err = Decide(pod); err != nil {
		return t, cniError(types.ErrInvalidNetworkConfig, "bad pod annotation", fmt.Errorf("pod %s: %w", t.pod, err))
	}
	if c := t.decision.Capture; c != nil {
		c.NetworkNamespace = args.Netns
		c.NativeNFTables = conf.NativeNFTables
		c.Backend = ipt.Mode(conf.IPTablesBackend)
	}
	return t, nil
}

// lookup finds the pod: in the node agent's cache when it holds it, without
// reading the kubeconfig, or else from the API server, with retries, by the
// helper (Fallback).
func (p *Plugin) lookup(conf *Config, log *slog.Logger, ns, name, uid string) (*Pod, error) {
	if pod := fromCache(conf, ns, name, uid); pod != nil {
		return pod, nil
	}
	// The slow path, so that an operator sees when it is taken.
	start := time.Now()
	defer func() {
		log.Info("pod not in the node agent's cache: asked the API server", "pod", ns+"/"+name, "took", time.Since(start))
	}()
	interval, _ := conf.lookupInterval() // checked by ParseConfig
	l := Lookup{Kubeconfig: conf.KubeconfigPath(), Namespace: ns, Name: name, Tries: conf.PodLookupTries, Interval: interval}
	if l.Kubeconfig == "" {
		return nil, cniError(types.ErrInvalidNetworkConfig, "kubeconfig", errors.New("no kubeconfig: set cni_agent_run_dir"))
	}
	fallback := p.Fallback
	if fallback == nil {
		fallback = runHelper
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.Timeout()+helperStart)
	defer cancel()
	pod, err := fallback(ctx, l)
	var kerr *KubeconfigError
	switch {
	case errors.As(err, &kerr):
		return nil, cniError(types.ErrInvalidNetworkConfig, "kubeconfig", err)
	case err != nil:
		return nil, cniError(types.ErrTryAgainLater, "pod lookup failed", err)
	}
	return pod, nil
}

// Add programs the pod's namespace when its sidecar needs capture, then
// passes the previous result through unchanged.
func (p *Plugin) Add(args *skel.CmdArgs) (err error) {
	t, err := p.resolve(args)
	if t != nil {
		defer func() { p.done(t, "ADD", err) }()
	}
	if err != nil {
		return err
	}
	if t.decision.Redirect {
		if err := p.applyCapture(t); err != nil {
			return err
		}
		t.log.Info("traffic capture installed", "pod", t.pod, "netns", args.Netns)
	} else {
		// At info, as Istio's plugin says why it left a pod alone.
		t.log.Info("pod passed through", "pod", t.pod, "reason", t.decision.Reason)
	}
	return t.conf.prev.printTo(p.Stdout, t.conf.CNIVersion)
}

func (p *Plugin) applyCapture(t *target) error {
	cfg := t.decision.Capture
	if t.conf.prev != nil {
		// The pod's addresses in the order the chain assigned them: IPv6
		// rules as Istio decides from the pod's interfaces.
		cfg.EnableIPv6 = capture.PodIPv6(t.conf.prev.addrs, cfg.DualStack)
	}
	apply := p.Apply
	if apply == nil {
		apply = func(ctx context.Context, cfg *capture.Config, log *slog.Logger) error {
			return capture.Run(ctx, cfg, log, capture.Env{Out: io.Discard})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), captureTimeout)
	defer cancel()
	start := time.Now()
	defer func() { t.log.Debug("capture applied", "pod", t.pod, "took", time.Since(start)) }()
	if err := apply(ctx, cfg, t.log); err != nil {
		return cniError(types.ErrInternal, "install traffic capture", fmt.Errorf("pod %s: %w", t.pod, err))
	}
	return nil
}

// Check verifies that a captured pod's namespace holds every rule its
// annotations call for, naming what is missing.
func (p *Plugin) Check(args *skel.CmdArgs) (err error) {
	t, err := p.resolve(args)
	if t != nil {
		defer func() { p.done(t, "CHECK", err) }()
	}
	if err != nil || !t.decision.Redirect {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), captureTimeout)
	defer cancel()
	drift, err := capture.Check(ctx, t.decision.Capture)
	if err != nil {
		return cniError(types.ErrInternal, "check traffic capture", fmt.Errorf("pod %s: %w", t.pod, err))
	}
	if len(drift) > 0 {
		return cniError(types.ErrInternal, "traffic capture rules are not intact",
			fmt.Errorf("pod %s: %s", t.pod, strings.Join(drift, "; ")))
	}
	return nil
}

// Del succeeds whatever the state: the rules live in the pod's namespace and
// go with it, and the pod or the namespace may already be gone.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	_, err := ParseConfig(args.StdinData)
	return err
}

// Status reports whether the plugin can serve ADDs: its kubeconfig must be readable.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	path := conf.KubeconfigPath()
	if path == "" {
		return cniError(types.ErrPluginNotAvailable, "no kubeconfig configured", errors.New("set cni_agent_run_dir"))
	}
	if _, err := os.Stat(path); err != nil {
		return cniError(types.ErrPluginNotAvailable, "kubeconfig not ready", err)
	}
	return nil
}

// GC has nothing to collect: the plugin keeps no state outside pod namespaces.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	_, err := ParseConfig(args.StdinData)
	return err
}
