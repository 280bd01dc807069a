package gotmpl

import (
	"reflect"
	"slices"
	"testing"
)

// everyMethod has a method of each name in Methods.
type everyMethod struct{}

func (everyMethod) String() string               { return "" }
func (everyMethod) Error() string                { return "" }
func (everyMethod) GetName() string              { return "" }
func (everyMethod) GetNamespace() string         { return "" }
func (everyMethod) GetGenerateName() string      { return "" }
func (everyMethod) GetUID() string               { return "" }
func (everyMethod) GetLabels() map[string]string { return nil }
func (everyMethod) GetAnnotations() map[string]string {
	return nil
}
func (everyMethod) GetOwnerReferences() []string { return nil }
func (everyMethod) GetResourceVersion() string   { return "" }
func (everyMethod) GetGeneration() int64         { return 0 }
func (everyMethod) GetCreationTimestamp() string { return "" }
func (everyMethod) Value() int64                 { return 0 }
func (everyMethod) MilliValue() int64            { return 0 }
func (everyMethod) IsZero() bool                 { return false }

// TestMethodsListed: method looks up exactly the names Methods lists.
func TestMethodsListed(t *testing.T) {
	v := reflect.ValueOf(everyMethod{})
	for _, name := range Methods {
		if !method(v, name).IsValid() {
			t.Errorf("Methods lists %s, which method does not look up", name)
		}
	}
	typ := v.Type()
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if method(v, name).IsValid() && !slices.Contains(Methods, name) {
			t.Errorf("method looks up %s, which Methods does not list", name)
		}
	}
	if got, want := typ.NumMethod(), len(Methods); got != want {
		t.Errorf("everyMethod has %d methods, Methods %d names", got, want)
	}
}
