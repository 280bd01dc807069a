package file

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/client-go/pkg/apis/networking/v1"
	security "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/istiod/duration"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
)

// ObjectError is a document that was skipped.
type ObjectError struct {
	// File is the path of the file.
	File string
	// Doc is the 1-based index of the YAML document in the file.
	Doc int
	// Kind, Namespace and Name identify the object, as far as they parsed.
	Kind, Namespace, Name string
	// Err is the reason.
	Err error
}

// Error returns "file: document N (Kind ns/name): reason".
func (e *ObjectError) Error() string {
	obj := "unknown object"
	if e.Kind != "" || e.Name != "" {
		obj = fmt.Sprintf("%s %s/%s", e.Kind, e.Namespace, e.Name)
	}
	return fmt.Sprintf("%s: document %d (%s): %v", e.File, e.Doc, obj, e.Err)
}

// Unwrap returns the reason.
func (e *ObjectError) Unwrap() error { return e.Err }

// header is the part of every document parsed first.
type header struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
}

// istioDoc is an Istio object with its spec left raw for protojson.
type istioDoc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
	Status     json.RawMessage   `json:"status,omitempty"`
}

// Parse reads every YAML document of data (named file in errors) and
// returns the valid objects and one *ObjectError per skipped document.
// Objects without a namespace get "default".
func Parse(file string, data []byte) ([]any, []error) {
	var objs []any
	var errs []error
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, &ObjectError{File: file, Doc: doc, Err: fmt.Errorf("read yaml: %w", err)})
			break
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			doc--
			continue
		}
		obj, h, err := parseDoc(raw)
		if err != nil {
			errs = append(errs, &ObjectError{File: file, Doc: doc, Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: h.Metadata.Name, Err: err})
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errs
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			out = append(out, t...)
		}
	}
	return out
}

func parseDoc(raw []byte) (any, header, error) {
	var h header
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, h, fmt.Errorf("yaml: %w", err)
	}
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, h, fmt.Errorf("header: %w", err)
	}
	if h.Metadata.Namespace == "" {
		h.Metadata.Namespace = "default"
	}
	if h.Kind == "" || h.APIVersion == "" {
		return nil, h, errors.New("apiVersion and kind are required")
	}
	var obj any
	switch group, _, _ := strings.Cut(h.APIVersion, "/"); {
	case h.APIVersion == "v1" && h.Kind == "Service":
		obj, err = strictKube(js, &corev1.Service{})
	case h.APIVersion == "v1" && h.Kind == "Pod":
		obj, err = strictKube(js, &corev1.Pod{})
	case h.APIVersion == "discovery.k8s.io/v1" && h.Kind == "EndpointSlice":
		obj, err = strictKube(js, &discoveryv1.EndpointSlice{})
	case group == "networking.istio.io" && !securityKinds[h.Kind]:
		obj, err = parseIstio(js, h.Kind)
	case (h.APIVersion == "security.istio.io/v1" || h.APIVersion == "security.istio.io/v1beta1") && securityKinds[h.Kind]:
		obj, err = parseIstio(js, h.Kind)
	default:
		err = fmt.Errorf("apiVersion %q kind %q: not a kind istiod reads", h.APIVersion, h.Kind)
	}
	if err != nil {
		return nil, h, err
	}
	if m, ok := obj.(metav1.Object); ok && m.GetNamespace() == "" {
		m.SetNamespace("default")
	}
	if err := validation.Accept(obj); err != nil {
		return nil, h, err
	}
	return obj, h, nil
}

// strictKube decodes a Kubernetes object, rejecting unknown fields.
func strictKube[T any](js []byte, obj *T) (*T, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	if err := d.Decode(obj); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return obj, nil
}

func parseIstio(js []byte, kind string) (any, error) {
	var doc istioDoc
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var spec proto.Message
	var obj any
	switch kind {
	case "ServiceEntry":
		o := &networking.ServiceEntry{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	case "WorkloadEntry":
		o := &networking.WorkloadEntry{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	case "VirtualService":
		o := &networking.VirtualService{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	case "DestinationRule":
		o := &networking.DestinationRule{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	case "Sidecar":
		o := &networking.Sidecar{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	case "PeerAuthentication":
		o := &security.PeerAuthentication{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	case "AuthorizationPolicy":
		o := &security.AuthorizationPolicy{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	case "RequestAuthentication":
		o := &security.RequestAuthentication{TypeMeta: typeMeta(doc), ObjectMeta: doc.Metadata}
		spec, obj = &o.Spec, o
	default:
		return nil, fmt.Errorf("kind %q: not an Istio kind istiod reads", kind)
	}
	if len(doc.Spec) == 0 || string(doc.Spec) == "null" {
		return nil, errors.New("spec: required")
	}
	if err := duration.Unmarshal(doc.Spec, spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return obj, nil
}

func typeMeta(d istioDoc) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: d.APIVersion, Kind: d.Kind}
}

// securityKinds are the security.istio.io kinds istiod reads.
var securityKinds = map[string]bool{"PeerAuthentication": true, "AuthorizationPolicy": true, "RequestAuthentication": true}
