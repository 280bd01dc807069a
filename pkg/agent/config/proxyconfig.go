package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// AuthenticationPolicy is Istio's controlPlaneAuthPolicy, by number
// (istio.mesh.v1alpha1.AuthenticationPolicy).
type AuthenticationPolicy int32

// The control plane's authentication policies.
const (
	// AuthNone is plaintext xDS and CA (istiod's port 15010).
	AuthNone AuthenticationPolicy = 0
	// AuthMutualTLS is TLS to istiod (port 15012), Istio's default.
	AuthMutualTLS AuthenticationPolicy = 1
)

// String is the policy's name in Istio's enum, or its number.
func (p AuthenticationPolicy) String() string {
	if name, ok := authPolicyEnum().name(int32(p)); ok {
		return name
	}
	return fmt.Sprint(int32(p))
}

// ProxyConfig is Istio's ProxyConfig (PROXY_CONFIG over the defaults): the
// fields the agent reads, typed, and the whole document for istiod (AsMap).
// Changes to the typed fields show in AsMap.
type ProxyConfig struct {
	DiscoveryAddress string
	StatusPort       int32
	ProxyAdminPort   int32
	// Concurrency is Envoy's worker threads; nil: unset (Envoy's --concurrency
	// is then left to the proxy's defaults).
	Concurrency              *int32
	DrainDuration            time.Duration
	TerminationDrainDuration time.Duration
	BinaryPath, ConfigPath   string
	// ServiceCluster is the clusterName oneof's serviceCluster, "" when
	// unset or when tracingServiceName is set instead.
	ServiceCluster         string
	ProxyMetadata          map[string]string
	ControlPlaneAuthPolicy AuthenticationPolicy

	// doc is the parsed document; the typed fields were read from it.
	doc *message
}

// GetDiscoveryAddress is DiscoveryAddress, "" for a nil config.
func (p *ProxyConfig) GetDiscoveryAddress() string {
	if p == nil {
		return ""
	}
	return p.DiscoveryAddress
}

// GetServiceCluster is ServiceCluster, "" for a nil config.
func (p *ProxyConfig) GetServiceCluster() string {
	if p == nil {
		return ""
	}
	return p.ServiceCluster
}

// GetProxyMetadata is ProxyMetadata, nil for a nil config.
func (p *ProxyConfig) GetProxyMetadata() map[string]string {
	if p == nil {
		return nil
	}
	return p.ProxyMetadata
}

// defaultProxyConfigJSON is Istio's defaults for a proxy, in the form
// protojson writes (DefaultProxyConfig).
const defaultProxyConfigJSON = `{
	"configPath": "./etc/istio/proxy",
	"binaryPath": "/usr/local/bin/envoy",
	"serviceCluster": "istio-proxy",
	"drainDuration": "45s",
	"terminationDrainDuration": "5s",
	"discoveryAddress": "` + DefaultAddress + `",
	"proxyAdminPort": 15000,
	"controlPlaneAuthPolicy": "MUTUAL_TLS",
	"statNameLength": 189,
	"statusPort": 15020
}`

// DefaultProxyConfig is Istio's ProxyConfig with nothing set.
func DefaultProxyConfig() *ProxyConfig {
	doc, err := decodeDocument([]byte(defaultProxyConfigJSON))
	if err != nil {
		panic(fmt.Sprintf("the default proxy config: %v", err))
	}
	return fromDocument(doc)
}

// ParseProxyConfig parses PROXY_CONFIG (JSON or YAML, Istio's field names
// in lowerCamel or snake_case) over the defaults, as protojson reads it
// and proto.Merge merges it: a field set replaces the default, a message
// merges field by field, maps merge by key, lists append. Only
// controlPlaneAuthPolicy is copied whenever it is given, since its zero
// value NONE is meaningful. Anything protojson refuses (an unknown field,
// a value of the wrong type) is an error naming the field and the value.
func ParseProxyConfig(s string) (*ProxyConfig, error) {
	if strings.TrimSpace(s) == "" {
		return DefaultProxyConfig(), nil
	}
	js, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: not JSON or YAML: %w", err)
	}
	over, err := decodeDocument(js)
	if err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: %w", err)
	}
	doc := DefaultProxyConfig().doc
	merge(doc, over)
	if given(js, "controlPlaneAuthPolicy", "control_plane_auth_policy") {
		v, _ := over.get("controlPlaneAuthPolicy")
		doc.set("controlPlaneAuthPolicy", v)
	}
	pc := fromDocument(doc)
	if pc.StatusPort <= 0 || pc.StatusPort > 65535 {
		return nil, fmt.Errorf("PROXY_CONFIG: statusPort %d is not a port", pc.StatusPort)
	}
	if _, _, err := net.SplitHostPort(pc.DiscoveryAddress); err != nil {
		return nil, fmt.Errorf("PROXY_CONFIG: discoveryAddress %q: %w", pc.DiscoveryAddress, err)
	}
	return pc, nil
}

// decodeDocument reads a JSON ProxyConfig.
func decodeDocument(js []byte) (*message, error) {
	v, err := readJSON(js)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(jsonObject); !ok {
		return nil, fmt.Errorf("%s is not an object", describe(v))
	}
	return decodeMessage(proxyConfigSchema, v, "")
}

// given reports whether the JSON object js has one of the keys, even null.
func given(js []byte, keys ...string) bool {
	var top map[string]json.RawMessage
	_ = json.Unmarshal(js, &top)
	for _, k := range keys {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

// The typed fields' values in a document.

func docString(doc *message, name string) string {
	s, _ := doc.get(name)
	v, _ := s.(string)
	return v
}

func docInt32(doc *message, name string) int32 {
	n, _ := doc.get(name)
	v, _ := n.(int64)
	return int32(v)
}

func docDuration(doc *message, name string) time.Duration {
	m, _ := doc.get(name)
	if d, ok := m.(*message); ok {
		return durationOf(d)
	}
	return 0
}

func docConcurrency(doc *message) *int32 {
	m, ok := doc.get("concurrency")
	if !ok {
		return nil
	}
	v, _ := m.(*message).fields[0].(int64)
	n := int32(v)
	return &n
}

func docProxyMetadata(doc *message) map[string]string {
	m, ok := doc.get("proxyMetadata")
	if !ok {
		return nil
	}
	out := map[string]string{}
	for k, v := range m.(map[string]any) {
		out[k] = v.(string)
	}
	return out
}

func docAuthPolicy(doc *message) AuthenticationPolicy {
	v, _ := doc.get("controlPlaneAuthPolicy")
	n, _ := v.(int32)
	return AuthenticationPolicy(n)
}

func fromDocument(doc *message) *ProxyConfig {
	return &ProxyConfig{
		DiscoveryAddress:         docString(doc, "discoveryAddress"),
		StatusPort:               docInt32(doc, "statusPort"),
		ProxyAdminPort:           docInt32(doc, "proxyAdminPort"),
		Concurrency:              docConcurrency(doc),
		DrainDuration:            docDuration(doc, "drainDuration"),
		TerminationDrainDuration: docDuration(doc, "terminationDrainDuration"),
		BinaryPath:               docString(doc, "binaryPath"),
		ConfigPath:               docString(doc, "configPath"),
		ServiceCluster:           docString(doc, "serviceCluster"),
		ProxyMetadata:            docProxyMetadata(doc),
		ControlPlaneAuthPolicy:   docAuthPolicy(doc),
		doc:                      doc,
	}
}

// AsMap is the whole ProxyConfig as istiod receives it in the node
// metadata PROXY_CONFIG: as protojson.Marshal writes it (lowerCamel names,
// zero values left out, enums by name, 64-bit integers as strings,
// durations as "1.500s"), decoded by encoding/json. A typed field changed
// since parsing replaces the document's value. It fails where protojson
// would: on a duration out of range, or whose seconds and nanoseconds
// differ in sign (a default merged with a negative fraction of a second).
func (p *ProxyConfig) AsMap() (map[string]any, error) {
	doc := newMessage(proxyConfigSchema)
	if p.doc != nil {
		doc = clone(p.doc).(*message)
	}
	p.apply(doc)
	v, err := encodeMessage(doc)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// apply writes into doc the typed fields that differ from doc's values.
func (p *ProxyConfig) apply(doc *message) {
	str := func(name, v string) {
		if docString(doc, name) != v {
			doc.set(name, orNil(v, v != ""))
		}
	}
	i32 := func(name string, v int32) {
		if docInt32(doc, name) != v {
			doc.set(name, orNil(int64(v), v != 0))
		}
	}
	dur := func(name string, d time.Duration) {
		if docDuration(doc, name) != d {
			f := &doc.t.Fields[doc.t.fieldIndex(name)]
			doc.set(name, durationMessage(f.Message, d))
		}
	}
	str("discoveryAddress", p.DiscoveryAddress)
	str("binaryPath", p.BinaryPath)
	str("configPath", p.ConfigPath)
	str("serviceCluster", p.ServiceCluster)
	i32("statusPort", p.StatusPort)
	i32("proxyAdminPort", p.ProxyAdminPort)
	dur("drainDuration", p.DrainDuration)
	dur("terminationDrainDuration", p.TerminationDrainDuration)
	if c := docConcurrency(doc); (c == nil) != (p.Concurrency == nil) || c != nil && *c != *p.Concurrency {
		var w any
		if p.Concurrency != nil {
			m := newMessage(doc.t.Fields[doc.t.fieldIndex("concurrency")].Message)
			if *p.Concurrency != 0 {
				m.fields[0] = int64(*p.Concurrency)
			}
			w = m
		}
		doc.set("concurrency", w)
	}
	if !maps.Equal(docProxyMetadata(doc), p.ProxyMetadata) {
		var m any
		if len(p.ProxyMetadata) > 0 {
			mm := make(map[string]any, len(p.ProxyMetadata))
			for k, v := range p.ProxyMetadata {
				mm[k] = v
			}
			m = mm
		}
		doc.set("proxyMetadata", m)
	}
	if docAuthPolicy(doc) != p.ControlPlaneAuthPolicy {
		doc.set("controlPlaneAuthPolicy", orNil(int32(p.ControlPlaneAuthPolicy), p.ControlPlaneAuthPolicy != 0))
	}
}

// orNil is v, or nil (unset) when not set.
func orNil(v any, set bool) any {
	if !set {
		return nil
	}
	return v
}

func authPolicyEnum() *enumType {
	return proxyConfigSchema.Fields[proxyConfigSchema.fieldIndex("controlPlaneAuthPolicy")].Enum
}

// Scrape is the app's Prometheus endpoint.
type Scrape struct {
	Scrape bool   `json:"scrape,string"`
	Path   string `json:"path"`
	Port   string `json:"port"`
}

// parseScrape reads ISTIO_PROMETHEUS_ANNOTATIONS: nil unless scraping is on.
func parseScrape(s string) (*Scrape, error) {
	if s == "" {
		return nil, nil
	}
	var sc Scrape
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		return nil, fmt.Errorf("not a JSON object of scrape, path and port: %w", err)
	}
	if !sc.Scrape {
		return nil, nil
	}
	if sc.Path == "" {
		sc.Path = "/metrics"
	}
	if sc.Port == "" {
		sc.Port = "80"
	}
	return &sc, nil
}
