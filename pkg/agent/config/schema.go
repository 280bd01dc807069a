package config

// The schema of Istio's ProxyConfig as plain data: what the proto
// descriptors of istio.io/api say about each field, enough to read
// PROXY_CONFIG as protojson reads it and to write it as protojson writes
// it, without linking the protobuf runtime. proxyconfig_schema.go holds
// the generated values (TestProxyConfigSchema writes it from istio.io/api's
// descriptors and fails when it is stale).

// kind is a field's (or a list's, or a map value's) scalar type; messages
// and enums carry their own description.
type kind uint8

const (
	kindString kind = iota + 1
	kindBool
	kindInt32 // int32, sint32, sfixed32
	kindInt64 // int64, sint64, sfixed64
	kindUint32
	kindUint64
	kindFloat
	kindDouble
	kindBytes
	kindEnum
	kindMessage
)

// wellKnown marks the google.protobuf messages protojson writes in a form
// of their own.
type wellKnown uint8

const (
	notWellKnown wellKnown = iota
	// wellKnownDuration is google.protobuf.Duration: "1.5s"; fields
	// seconds (0) and nanos (1).
	wellKnownDuration
	// wellKnownWrapper is BoolValue, Int32Value, StringValue...: the bare
	// value of its one field, value (0).
	wellKnownWrapper
	// wellKnownEmpty is google.protobuf.Empty: {}.
	wellKnownEmpty
)

// messageType is a message's fields, in declaration order.
type messageType struct {
	// Name is the message's full name.
	Name      string
	WellKnown wellKnown
	Fields    []field
	// Oneofs names the message's oneofs; field.Oneof indexes it from 1.
	Oneofs []string
}

// field is one field of a message.
type field struct {
	// Name is the proto name (snake_case), JSONName protojson's (lowerCamel);
	// protojson reads either.
	Name, JSONName string
	// Kind is the field's type, or its elements' for a list, or its values'
	// for a map.
	Kind kind
	// Repeated is a list, unless MapKey is set: then a map from MapKey
	// (a string or integer kind, or bool) to Kind.
	Repeated bool
	MapKey   kind
	// Presence is explicit presence: a message, a oneof member or a proto3
	// optional field is set even when its value is the zero value.
	Presence bool
	// Oneof is the containing oneof (1-based index in Oneofs), 0 for none.
	Oneof   int
	Enum    *enumType
	Message *messageType
}

// enumType is an enum's values.
type enumType struct {
	Name   string
	Values []enumValue
}

type enumValue struct {
	Name   string
	Number int32
}

// fieldIndex finds a field by its JSON name or its proto name, -1 if
// there is none.
func (t *messageType) fieldIndex(name string) int {
	for i := range t.Fields {
		if t.Fields[i].JSONName == name || t.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

func (e *enumType) number(name string) (int32, bool) {
	for _, v := range e.Values {
		if v.Name == name {
			return v.Number, true
		}
	}
	return 0, false
}

func (e *enumType) name(n int32) (string, bool) {
	for _, v := range e.Values {
		if v.Number == n {
			return v.Name, true
		}
	}
	return "", false
}
