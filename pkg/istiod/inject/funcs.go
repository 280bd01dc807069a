package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// templateFuncs are the functions injection templates may call: Sprig's
// text functions (as Helm and Istio offer them) with Istio's injector
// functions over them, so a template written for Istio's
// istio-sidecar-injector ConfigMap renders here unchanged. Where Istio
// redefines a Sprig name (indent, toYaml, contains) Istio's meaning wins.
func templateFuncs() template.FuncMap {
	fm := sprig.TxtFuncMap()
	maps.Copy(fm, template.FuncMap{
		"annotation":             annotationOr,
		"isset":                  isset,
		"valueOrDefault":         valueOrDefault,
		"toJSON":                 toJSON,
		"fromJSON":               fromJSON,
		"structToJSON":           structToJSON,
		"protoToJSON":            protoToJSON,
		"toYaml":                 toYaml,
		"indent":                 indentRest,
		"directory":              directory,
		"contains":               contains,
		"toLower":                strings.ToLower,
		"lower":                  strings.ToLower,
		"formatDuration":         formatDuration,
		"excludeInboundPort":     excludeInboundPort,
		"includeInboundPorts":    includeInboundPorts,
		"applicationPorts":       applicationPorts,
		"kubevirtInterfaces":     identity,
		"excludeInterfaces":      identity,
		"appendMultusNetwork":    appendMultusNetwork,
		"env":                    envOr,
		"omit":                   omit,
		"strdict":                strdict,
		"toJsonMap":              toJSONMap,
		"mergeMaps":              mergeMaps,
		"omitNil":                omitNil,
		"otelResourceAttributes": otelResourceAttributes,
	})
	return fm
}

// annotationOr is meta's annotation name, else def printed with %v (so a
// nil default prints "<nil>", as in Istio).
func annotationOr(meta metav1.ObjectMeta, name string, def any) string {
	if v, ok := meta.Annotations[name]; ok {
		return v
	}
	return fmt.Sprint(def)
}

// isset reports whether m has key.
func isset(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok
}

// valueOrDefault is v unless v is nil or the empty string.
func valueOrDefault(v, def any) any {
	if v == nil || v == "" {
		return def
	}
	return v
}

// toJSON encodes v as JSON; a nil map is "{}".
func toJSON(v any) (string, error) {
	if m, ok := v.(map[string]string); ok && m == nil {
		return "{}", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toJSON: %w", err)
	}
	return string(b), nil
}

// fromJSON decodes s; text that is not JSON gives the string "{}".
func fromJSON(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return "{}"
	}
	return v
}

// structToJSON encodes v as JSON; nil is "{}".
func structToJSON(v any) (string, error) {
	if v == nil {
		return "{}", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("structToJSON: %w", err)
	}
	return string(b), nil
}

// protoToJSON encodes a message as compact protobuf JSON (fields in
// declaration order). A ProxyConfig loses the fields equal to Istio's
// built-in defaults first, so PROXY_CONFIG carries only what differs.
func protoToJSON(m proto.Message) (string, error) {
	if pc, ok := m.(*meshconfig.ProxyConfig); ok {
		if pc == nil {
			return "{}", nil
		}
		m = withoutDefaults(pc)
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("protoToJSON: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return "", fmt.Errorf("protoToJSON: %w", err)
	}
	return out.String(), nil
}

// toYaml encodes v as YAML, ending in a newline.
func toYaml(v any) (string, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return string(b), nil
}

// indentRest indents every line of s but the first by n spaces (Istio's
// indent; Sprig's nindent is the one that starts a new line).
func indentRest(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return strings.ReplaceAll(s, "\n", "\n"+pad)
}

// directory is p's directory, with its trailing slash.
func directory(p string) string {
	dir, _ := path.Split(p)
	return dir
}

// contains reports whether s contains sub (needle first, like Sprig's).
func contains(sub, s string) bool { return strings.Contains(s, sub) }

// formatDuration prints d the way Go prints a time.Duration.
func formatDuration(d *durationpb.Duration) string { return d.AsDuration().String() }

func identity(s string) string { return s }

// envOr is istiod's environment variable key, else def.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// excludeInboundPort adds port to the comma-separated list unless it is
// empty, 0 or already there.
func excludeInboundPort(port any, list string) string {
	p := strings.TrimSpace(fmt.Sprint(port))
	if p == "" || p == "0" {
		return list
	}
	var keep []string
	for _, q := range strings.Split(list, ",") {
		if q == p {
			return list
		}
		if q = strings.TrimSpace(q); q != "" {
			keep = append(keep, q)
		}
	}
	return strings.Join(append(keep, p), ",")
}

// includeInboundPorts lists the containers' TCP ports, comma-separated.
func includeInboundPorts(cs []corev1.Container) string {
	return containerPorts(cs, "")
}

// applicationPorts is includeInboundPorts without istio-proxy's ports.
func applicationPorts(cs []corev1.Container) string {
	return containerPorts(cs, "istio-proxy")
}

func containerPorts(cs []corev1.Container, skip string) string {
	var out []string
	for _, c := range cs {
		if c.Name == skip && skip != "" {
			continue
		}
		for _, p := range c.Ports {
			if p.Protocol == corev1.ProtocolUDP || p.Protocol == corev1.ProtocolSCTP {
				continue
			}
			out = append(out, strconv.Itoa(int(p.ContainerPort)))
		}
	}
	return strings.Join(out, ",")
}
