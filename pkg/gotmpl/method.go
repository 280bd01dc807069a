package gotmpl

import (
	"reflect"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Methods are the methods, by name, that templates may call on any value,
// beside protobuf getters. Each is looked up with a constant name, so the
// linker keeps only methods of these names. A template that calls another
// method gets an error that names it.
var Methods = []string{
	"String", "Error",
	// Kubernetes object metadata.
	"GetName", "GetNamespace", "GetGenerateName", "GetUID", "GetLabels", "GetAnnotations",
	"GetOwnerReferences", "GetResourceVersion", "GetGeneration", "GetCreationTimestamp",
	// resource.Quantity and similar values.
	"Value", "MilliValue", "IsZero",
}

// method is v's method called name if name is one of Methods.
func method(v reflect.Value, name string) reflect.Value {
	switch name {
	case "String":
		return v.MethodByName("String")
	case "Error":
		return v.MethodByName("Error")
	case "GetName":
		return v.MethodByName("GetName")
	case "GetNamespace":
		return v.MethodByName("GetNamespace")
	case "GetGenerateName":
		return v.MethodByName("GetGenerateName")
	case "GetUID":
		return v.MethodByName("GetUID")
	case "GetLabels":
		return v.MethodByName("GetLabels")
	case "GetAnnotations":
		return v.MethodByName("GetAnnotations")
	case "GetOwnerReferences":
		return v.MethodByName("GetOwnerReferences")
	case "GetResourceVersion":
		return v.MethodByName("GetResourceVersion")
	case "GetGeneration":
		return v.MethodByName("GetGeneration")
	case "GetCreationTimestamp":
		return v.MethodByName("GetCreationTimestamp")
	case "Value":
		return v.MethodByName("Value")
	case "MilliValue":
		return v.MethodByName("MilliValue")
	case "IsZero":
		return v.MethodByName("IsZero")
	}
	return reflect.Value{}
}

var protoMessageType = reflect.TypeFor[protoreflect.ProtoMessage]()

// protoGetter evaluates GetX on a generated protobuf message as its getter
// does: the field X, or X's zero value on a nil message. ok is false when
// ptr is not a message or has no field X (a oneof member's getter, say).
func protoGetter(ptr reflect.Value, name string) (v reflect.Value, ok bool) {
	field, found := strings.CutPrefix(name, "Get")
	if !found || field == "" || ptr.Kind() != reflect.Pointer || !ptr.Type().Implements(protoMessageType) {
		return reflect.Value{}, false
	}
	et := ptr.Type().Elem()
	if et.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f, ok := et.FieldByName(field)
	if !ok || !f.IsExported() || len(f.Index) != 1 {
		return reflect.Value{}, false
	}
	if ptr.IsNil() {
		return reflect.Zero(f.Type), true
	}
	// A getter's result is a copy: not addressable.
	return ptr.Elem().Field(f.Index[0]).Convert(f.Type), true
}

// unsupportedMethodHint explains, in an error, that name may be a method
// this executor does not call.
func unsupportedMethodHint(name string) string {
	if name == "" || name[0] < 'A' || name[0] > 'Z' {
		return ""
	}
	return " (if " + name + " is a method: templates here may call only protobuf getters and " + strings.Join(Methods, ", ") + ")"
}
