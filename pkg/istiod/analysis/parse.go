package analysis

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/duration"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// The API groups of Istio's kinds.
var istioGroups = map[string]bool{
	"networking.istio.io": true, "security.istio.io": true, "extensions.istio.io": true, "telemetry.istio.io": true,
}

// doc is an object with its spec left raw.
type doc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
}

// AddJSON decodes one object (JSON) into s; objects without a namespace
// get ns. Kubernetes kinds other than Service and Pod are ignored. It
// returns the object's key (empty Kind when ignored).
func (s *Set) AddJSON(raw []byte, ns, origin string) (model.Key, error) {
	var d doc
	if err := json.Unmarshal(raw, &d); err != nil {
		return model.Key{}, fmt.Errorf("decode: %w", err)
	}
	if d.Metadata.Namespace == "" {
		d.Metadata.Namespace = ns
	}
	k := model.Key{Kind: model.Kind(d.Kind), Namespace: d.Metadata.Namespace, Name: d.Metadata.Name}
	group, _, _ := strings.Cut(d.APIVersion, "/")
	if !strings.Contains(d.APIVersion, "/") {
		group = ""
	}
	if d.Kind == "" || d.APIVersion == "" {
		return k, errors.New("apiVersion and kind are required")
	}
	if !istioGroups[group] {
		switch {
		case group == "" && d.Kind == "Service":
			var o corev1.Service
			if err := json.Unmarshal(raw, &o); err != nil {
				return k, fmt.Errorf("%s: %w", k, err)
			}
			o.Namespace = k.Namespace
			s.Services = append(s.Services, &o)
		case group == "" && d.Kind == "Pod":
			var o corev1.Pod
			if err := json.Unmarshal(raw, &o); err != nil {
				return k, fmt.Errorf("%s: %w", k, err)
			}
			o.Namespace = k.Namespace
			s.Pods = append(s.Pods, model.PodOf(&o))
		default:
			return model.Key{}, nil
		}
		s.origin(k, origin)
		return k, nil
	}
	spec, add := s.slot(group, d)
	if spec == nil {
		s.Unread = append(s.Unread, k)
		s.origin(k, origin)
		return k, nil
	}
	if len(bytes.TrimSpace(d.Spec)) == 0 || string(bytes.TrimSpace(d.Spec)) == "null" {
		return k, fmt.Errorf("%s: spec: required", k)
	}
	if err := duration.Unmarshal(d.Spec, spec); err != nil {
		return k, fmt.Errorf("%s: spec: %w", k, err)
	}
	add()
	s.origin(k, origin)
	return k, nil
}

func (s *Set) origin(k model.Key, origin string) {
	if origin == "" {
		return
	}
	if s.Origins == nil {
		s.Origins = map[model.Key]string{}
	}
	s.Origins[k] = origin
}

// slot returns the spec to decode into for an Istio kind istiod or the
// analyzers read, and the function that adds the object to s; nil for
// kinds nothing reads.
func (s *Set) slot(group string, d doc) (proto.Message, func()) {
	tm := metav1.TypeMeta{APIVersion: d.APIVersion, Kind: d.Kind}
	m := d.Metadata
	switch group + "/" + d.Kind {
	case "networking.istio.io/VirtualService":
		o := &networking.VirtualService{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.VirtualServices = append(s.VirtualServices, o) }
	case "networking.istio.io/DestinationRule":
		o := &networking.DestinationRule{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.DestinationRules = append(s.DestinationRules, o) }
	case "networking.istio.io/ServiceEntry":
		o := &networking.ServiceEntry{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.ServiceEntries = append(s.ServiceEntries, o) }
	case "networking.istio.io/WorkloadEntry":
		o := &networking.WorkloadEntry{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.WorkloadEntries = append(s.WorkloadEntries, o) }
	case "networking.istio.io/Sidecar":
		o := &networking.Sidecar{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.Sidecars = append(s.Sidecars, o) }
	case "networking.istio.io/Gateway":
		o := &networking.Gateway{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() {
			s.Gateways = append(s.Gateways, o)
			s.Unread = append(s.Unread, model.Key{Kind: KindGateway, Namespace: m.Namespace, Name: m.Name})
		}
	case "security.istio.io/PeerAuthentication":
		o := &security.PeerAuthentication{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.PeerAuthentications = append(s.PeerAuthentications, o) }
	case "security.istio.io/AuthorizationPolicy":
		o := &security.AuthorizationPolicy{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.AuthorizationPolicies = append(s.AuthorizationPolicies, o) }
	case "security.istio.io/RequestAuthentication":
		o := &security.RequestAuthentication{TypeMeta: tm, ObjectMeta: m}
		return &o.Spec, func() { s.RequestAuthentications = append(s.RequestAuthentications, o) }
	}
	return nil, nil
}

// ParseError is a document that could not be read.
type ParseError struct {
	// Origin is "file:line" of the document.
	Origin string
	// Err is the reason.
	Err error
}

// Error returns "origin: reason".
func (e *ParseError) Error() string { return e.Origin + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *ParseError) Unwrap() error { return e.Err }

// AddYAML reads every YAML document of data (named name in origins) into
// s, and returns one *ParseError per document it could not read. Objects
// without a namespace get ns. A message's origin is "name:line", the line
// of the document's first key.
func (s *Set) AddYAML(name string, data []byte, ns string) []error {
	var errs []error
	for _, d := range splitDocs(data) {
		origin := fmt.Sprintf("%s:%d", name, d.line)
		js, err := yaml.YAMLToJSON(d.raw)
		if err != nil {
			errs = append(errs, &ParseError{Origin: origin, Err: err})
			continue
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		k, err := s.AddJSON(js, ns, origin)
		if err != nil {
			errs = append(errs, &ParseError{Origin: origin, Err: err})
			continue
		}
		if k.Kind != "" {
			s.remember(k, name, d.first, d.raw)
		}
	}
	return errs
}

// yamlDoc is one document of a YAML stream and the line of its first
// content.
type yamlDoc struct {
	raw   []byte
	line  int // first content line
	first int // first line of raw
}

// splitDocs splits a YAML stream at "---" lines.
func splitDocs(data []byte) []yamlDoc {
	var out []yamlDoc
	cur := yamlDoc{first: 1}
	for i, l := range bytes.SplitAfter(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(l, []byte("---")); ok {
			if t := bytes.TrimSpace(rest); len(t) == 0 || t[0] == '#' {
				if cur.line > 0 {
					out = append(out, cur)
				}
				cur = yamlDoc{first: i + 2}
				continue
			}
		}
		if t := bytes.TrimSpace(l); cur.line == 0 && len(t) > 0 && t[0] != '#' {
			cur.line = i + 1
		}
		cur.raw = append(cur.raw, l...)
	}
	if cur.line > 0 {
		out = append(out, cur)
	}
	return out
}
