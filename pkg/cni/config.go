package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/logflags"
)

// KubeconfigName is the kubeconfig the node agent writes into cni_agent_run_dir.
const KubeconfigName = "istio-cni-kubeconfig"

// Config is the plugin's entry in the conflist. It accepts Istio's current
// flat keys and the legacy "kubernetes" block. install-cni writes its entry
// by marshalling a Config, so these JSON tags are the one list of keys.
type Config struct {
	types.PluginConf

	LogLevel          string   `json:"plugin_log_level,omitempty"`
	AgentRunDir       string   `json:"cni_agent_run_dir,omitempty"`
	ExcludeNamespaces []string `json:"exclude_namespaces,omitempty"`
	PodNamespace      string   `json:"pod_namespace,omitempty"`
	// NativeNFTables is written even when false, as Istio's installer does.
	NativeNFTables bool `json:"native_nftables"`

	LegacyLogLevel string     `json:"log_level,omitempty"`
	Kubernetes     LegacyKube `json:"kubernetes,omitzero"`

	// Skiff's own knobs for the pod lookup (Istio: 30 tries, 1 s apart).
	PodLookupTries    int    `json:"pod_lookup_tries,omitempty"`
	PodLookupInterval string `json:"pod_lookup_interval,omitempty"`
	// LogFile, when set, receives the plugin's logs as well as stderr.
	LogFile string `json:"log_file,omitempty"`
	// IPTablesBackend forces "legacy" or "nft" instead of detecting per pod.
	IPTablesBackend string `json:"iptables_backend,omitempty"`

	// PrevResultJSON is "prevResult" as it came: being shallower, it takes
	// the key from the embedded PluginConf's map, so that the result passes
	// through without a decode into the library's types (see prevResult).
	PrevResultJSON json.RawMessage `json:"prevResult,omitempty"`

	// level is LogLevel parsed by ParseConfig.
	level slog.Level
	// prev is PrevResultJSON parsed by ParseConfig, nil without one.
	prev *prevResult
}

// MarshalJSON encodes the entry with only the keys that are set. It exists
// because the embedded types.PluginConf has a MarshalJSON of its own that,
// promoted to *Config, would encode the CNI fields alone and drop every key
// above; it also leaves out the empty "ipam" object PluginConf writes.
func (c Config) MarshalJSON() ([]byte, error) {
	type keys Config // Config's fields without its methods
	b, err := json.Marshal(keys(c))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if c.IPAM == (types.IPAM{}) {
		delete(m, "ipam")
	}
	if c.DNS.IsEmpty() {
		delete(m, "dns")
	}
	return json.Marshal(m)
}

// LegacyKube is the "kubernetes" block of older Istio CNI configurations.
type LegacyKube struct {
	Kubeconfig        string   `json:"kubeconfig,omitempty"`
	CNIBinDir         string   `json:"cni_bin_dir,omitempty"`
	ExcludeNamespaces []string `json:"exclude_namespaces,omitempty"`
}

// ParseConfig reads the plugin configuration from stdin's bytes. Its errors
// are CNI errors: a decoding failure, or an invalid configuration naming the
// key and value.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "parse network configuration", err.Error())
	}
	if err := c.normalise(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "bad network configuration", err.Error())
	}
	prev, err := parsePrevResult(c.PrevResultJSON, c.CNIVersion)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "bad prevResult", err.Error())
	}
	c.prev = prev
	return &c, nil
}

func (c *Config) normalise() error {
	levelKey := "plugin_log_level"
	if c.LogLevel == "" {
		c.LogLevel, levelKey = c.LegacyLogLevel, "log_level"
	}
	level, err := ParseLogLevel(c.LogLevel)
	if err != nil {
		return fmt.Errorf("%s: %q: %w", levelKey, c.LogLevel, err)
	}
	c.level = level
	c.ExcludeNamespaces = append(c.ExcludeNamespaces, c.Kubernetes.ExcludeNamespaces...)
	if c.PodLookupTries == 0 {
		c.PodLookupTries = 30
	}
	if c.PodLookupTries < 0 {
		return fmt.Errorf("pod_lookup_tries: %d is negative", c.PodLookupTries)
	}
	if _, err := c.lookupInterval(); err != nil {
		return err
	}
	if c.IPTablesBackend != "" {
		if _, err := ipt.ParseMode(c.IPTablesBackend); err != nil {
			return fmt.Errorf("iptables_backend: %q: %w", c.IPTablesBackend, err)
		}
	}
	if c.PodNamespace == "" {
		c.PodNamespace = "istio-system"
	}
	return nil
}

// ParseLogLevel reads a plugin_log_level as every Skiff binary reads Istio's
// levels (logflags.ParseLevel): debug, info, warn, error, fatal (nothing
// but fatal records, which the plugin has none of) or none, in any case; an
// empty level is info.
func ParseLogLevel(s string) (slog.Level, error) {
	s = strings.TrimSpace(s)
	lvl, err := logflags.ParseLevel(s)
	if err != nil || strings.ContainsAny(s, ":,") { // one level, no scope list
		return 0, errors.New("want debug, info, warn, error, fatal or none")
	}
	return lvl, nil
}

func (c *Config) lookupInterval() (time.Duration, error) {
	if c.PodLookupInterval == "" {
		return time.Second, nil
	}
	d, err := time.ParseDuration(c.PodLookupInterval)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("pod_lookup_interval: %q is not a duration", c.PodLookupInterval)
	}
	return d, nil
}

// KubeconfigPath is where the plugin finds its kubeconfig.
func (c *Config) KubeconfigPath() string {
	if c.AgentRunDir != "" {
		return filepath.Join(c.AgentRunDir, KubeconfigName)
	}
	return c.Kubernetes.Kubeconfig
}

// excluded reports whether pods of the namespace are never captured.
func (c *Config) excluded(ns string) bool {
	for _, x := range c.ExcludeNamespaces {
		if x == ns {
			return true
		}
	}
	return false
}

// PodArgs are the Kubernetes CNI_ARGS the runtime passes.
type PodArgs struct {
	types.CommonArgs
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive // CNI_ARGS key
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // CNI_ARGS key
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive // CNI_ARGS key
	K8S_POD_UID                types.UnmarshallableString //nolint:revive // CNI_ARGS key
}

// ParseArgs reads CNI_ARGS.
func ParseArgs(s string) (*PodArgs, error) {
	var a PodArgs
	if err := types.LoadArgs(s, &a); err != nil {
		return nil, fmt.Errorf("parse CNI_ARGS: %w", err)
	}
	return &a, nil
}
