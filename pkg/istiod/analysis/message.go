package analysis

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// Level is a message's severity; higher is worse.
type Level int

// The levels, as Istio's analyzers have them.
const (
	Info Level = iota
	Warning
	Error
)

// String returns "Info", "Warning" or "Error".
func (l Level) String() string {
	switch l {
	case Info:
		return "Info"
	case Warning:
		return "Warning"
	case Error:
		return "Error"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel reads a level name, in any case ("warning", "Error").
func ParseLevel(s string) (Level, error) {
	for _, l := range []Level{Info, Warning, Error} {
		if strings.EqualFold(s, l.String()) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("level %q: want one of Info, Warning, Error", s)
}

// Type is a kind of message: a code, a default level and a template.
type Type struct {
	// Code is the stable identifier ("IST0101"; Skiff's own are SKFnnnn).
	Code string
	// Name is the CamelCase name ("ReferencedResourceNotFound").
	Name string
	// Level is the severity.
	Level Level
	// Template is a fmt format for the parameters.
	Template string
}

// The message types. IST codes are Istio's, with Istio's meaning and (for
// the short ones that scripts match on) Istio's template; SKF codes are
// Skiff's, for what Istio has no message for.
var (
	// ReferencedResourceNotFound: a reference (host, gateway, egress host)
	// names nothing known. Params: what, the reference.
	ReferencedResourceNotFound = &Type{Code: "IST0101", Name: "ReferencedResourceNotFound", Level: Error, Template: "Referenced %s not found: %q"}
	// ConflictingMeshGatewayVirtualServiceHosts: more than one
	// VirtualService bound to the mesh defines a host. Params: the
	// VirtualServices, the host.
	ConflictingMeshGatewayVirtualServiceHosts = &Type{Code: "IST0109", Name: "ConflictingMeshGatewayVirtualServiceHosts", Level: Error,
		Template: "VirtualServices %s bound to the mesh all define host %s; only one of them is used for it. Merge them into one VirtualService."}
	// UnknownDestinationRuleHost: a DestinationRule's host matches no
	// service. Params: the host.
	UnknownDestinationRuleHost = &Type{Code: "IST0174", Name: "UnknownDestinationRuleHost", Level: Warning,
		Template: "DestinationRule host %s matches no service in the mesh."}
	// UntranslatedField: a field istiod accepts but does not translate for
	// a proxy type. Params: the field (with its value when the value is
	// what matters), the proxy type, the consequence.
	UntranslatedField = &Type{Code: "SKF0001", Name: "UntranslatedField", Level: Warning,
		Template: "%s is not translated for %s: %s"}
	// UnreadKind: a kind istiod does not read at all. Params: the kind, the
	// consequence.
	UnreadKind = &Type{Code: "SKF0002", Name: "UnreadKind", Level: Warning,
		Template: "istiod does not read %s resources: %s"}
	// GatewayOnlyVirtualService: a VirtualService bound only to gateways,
	// which istiod does not configure. Params: the gateways.
	GatewayOnlyVirtualService = &Type{Code: "SKF0003", Name: "GatewayOnlyVirtualService", Level: Warning,
		Template: "bound only to gateways %s and not to mesh: istiod configures no gateway proxies, so this VirtualService affects no traffic"}
)

// Types lists every message type, by code.
func Types() []*Type {
	return []*Type{ReferencedResourceNotFound, ConflictingMeshGatewayVirtualServiceHosts, UnknownDestinationRuleHost,
		UntranslatedField, UnreadKind, GatewayOnlyVirtualService}
}

// Message is one finding about one resource.
type Message struct {
	// Type says what was found.
	Type *Type
	// Level is the severity (the type's, unless a support rule says
	// otherwise).
	Level Level
	// Resource is the object the message is about.
	Resource model.Key
	// Field is the path of the field concerned
	// ("spec.http[0].route[0].destination.host"); empty for the whole
	// object.
	Field string
	// Text is the rendered message.
	Text string
	// Origin is where the object was read ("bookinfo.yaml:12"), when known.
	Origin string
}

// newMessage renders a message of type t.
func newMessage(t *Type, r model.Key, field string, params ...any) Message {
	return Message{Type: t, Level: t.Level, Resource: r, Field: field, Text: fmt.Sprintf(t.Template, params...)}
}

// String formats m as istioctl analyze prints it:
// "Error [IST0101] (VirtualService default/reviews file.yaml:3) Referenced host not found: \"x\"".
func (m Message) String() string {
	origin := m.Resource.String()
	if m.Origin != "" {
		origin += " " + m.Origin
	}
	return fmt.Sprintf("%s [%s] (%s) %s", m.Level, m.Type.Code, origin, m.Text)
}

// Warning formats m for an admission warning: the code, the field and the
// text ("IST0101 spec.http[0].route[0].destination.host: Referenced host
// not found: \"x\""); the field is not repeated when the text starts
// with it.
func (m Message) Warning() string {
	if m.Field == "" || strings.HasPrefix(m.Text, m.Field) {
		return fmt.Sprintf("%s: %s", m.Type.Code, m.Text)
	}
	return fmt.Sprintf("%s %s: %s", m.Type.Code, m.Field, m.Text)
}

// id is what makes two messages the same finding.
func (m Message) id() string {
	return m.Type.Code + "|" + m.Resource.String() + "|" + m.Field + "|" + m.Text
}

// DocsURL is where Istio documents its codes.
const DocsURL = "https://istio.io/latest/docs/reference/config/analysis"

// MarshalJSON writes the message as istioctl analyze -o json does: code,
// level, origin ("Kind ns/name"), reference (file:line, when known),
// message and documentationUrl (Istio's codes only), plus the field path.
func (m Message) MarshalJSON() ([]byte, error) {
	doc := ""
	if strings.HasPrefix(m.Type.Code, "IST") {
		doc = DocsURL + "/" + strings.ToLower(m.Type.Code) + "/"
	}
	return json.Marshal(struct {
		Code      string `json:"code"`
		Level     string `json:"level"`
		Origin    string `json:"origin"`
		Reference string `json:"reference,omitempty"`
		Field     string `json:"field,omitempty"`
		Message   string `json:"message"`
		DocURL    string `json:"documentationUrl,omitempty"`
	}{m.Type.Code, m.Level.String(), m.Resource.String(), m.Origin, m.Field, m.Text, doc})
}

// MissingHost reports whether m is about a reference to a host that does
// not exist (a destination, a mirror, a Sidecar egress host); what the
// validation webhook refuses when told to.
func (m Message) MissingHost() bool {
	return m.Type == ReferencedResourceNotFound && (strings.HasSuffix(m.Field, ".host") || strings.Contains(m.Field, ".hosts["))
}
