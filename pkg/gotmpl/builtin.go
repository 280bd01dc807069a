package gotmpl

import (
	"errors"
	"fmt"
	"reflect"
	"text/template"
)

// builtins are text/template's predefined functions. and, or and call
// are handled by evalCall; their entries give the signature.
var builtins = map[string]reflect.Value{
	"and":      reflect.ValueOf(func(reflect.Value, ...reflect.Value) reflect.Value { panic("unreachable") }),
	"or":       reflect.ValueOf(func(reflect.Value, ...reflect.Value) reflect.Value { panic("unreachable") }),
	"call":     reflect.ValueOf(func(reflect.Value, ...reflect.Value) reflect.Value { panic("unreachable") }),
	"not":      reflect.ValueOf(not),
	"html":     reflect.ValueOf(template.HTMLEscaper),
	"js":       reflect.ValueOf(template.JSEscaper),
	"urlquery": reflect.ValueOf(template.URLQueryEscaper),
	"index":    reflect.ValueOf(index),
	"slice":    reflect.ValueOf(slice),
	"len":      reflect.ValueOf(length),
	"print":    reflect.ValueOf(fmt.Sprint),
	"printf":   reflect.ValueOf(fmt.Sprintf),
	"println":  reflect.ValueOf(fmt.Sprintln),
	"eq":       reflect.ValueOf(eq),
	"ne":       reflect.ValueOf(ne),
	"lt":       reflect.ValueOf(lt),
	"le":       reflect.ValueOf(le),
	"gt":       reflect.ValueOf(gt),
	"ge":       reflect.ValueOf(ge),
}

// indirect goes through pointers and interfaces to the value inside,
// stopping at a nil one.
func indirect(v reflect.Value) (reflect.Value, bool) {
	for ; v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface; v = v.Elem() {
		if v.IsNil() {
			return v, true
		}
	}
	return v, false
}

// indirectInterface is the value inside an interface, if v is one.
func indirectInterface(v reflect.Value) reflect.Value {
	switch {
	case v.Kind() != reflect.Interface:
		return v
	case v.IsNil():
		return reflect.Value{}
	}
	return v.Elem()
}

// isTrue is a value's truth in if, with, and, or and not: non-zero,
// non-empty, non-nil. ok is false for a type without one.
func isTrue(v reflect.Value) (truth, ok bool) {
	if !v.IsValid() {
		return false, true
	}
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() > 0, true
	case reflect.Bool:
		return v.Bool(), true
	case reflect.Complex64, reflect.Complex128:
		return v.Complex() != 0, true
	case reflect.Chan, reflect.Func, reflect.Pointer, reflect.UnsafePointer, reflect.Interface:
		return !v.IsNil(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() != 0, true
	case reflect.Float32, reflect.Float64:
		return v.Float() != 0, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() != 0, true
	case reflect.Struct:
		return true, true
	}
	return false, false
}

func truth(v reflect.Value) bool {
	t, _ := isTrue(indirectInterface(v))
	return t
}

func not(v reflect.Value) bool { return !truth(v) }

func indexArg(i reflect.Value, limit int) (int, error) {
	var x int64
	switch i.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x = i.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x = int64(i.Uint())
	case reflect.Invalid:
		return 0, errors.New("cannot index slice/array with nil")
	default:
		return 0, fmt.Errorf("cannot index slice/array with type %s", i.Type())
	}
	if x < 0 || int(x) < 0 || int(x) > limit {
		return 0, fmt.Errorf("index out of range: %d", x)
	}
	return int(x), nil
}

func intLike(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// prepareArg fits v to t for index's map keys and call's arguments.
func prepareArg(v reflect.Value, t reflect.Type) (reflect.Value, error) {
	if !v.IsValid() {
		if !canBeNil(t) {
			return reflect.Value{}, fmt.Errorf("value is nil; should be of type %s", t)
		}
		v = reflect.Zero(t)
	}
	if v.Type().AssignableTo(t) {
		return v, nil
	}
	if intLike(v.Kind()) && intLike(t.Kind()) && v.Type().ConvertibleTo(t) {
		return v.Convert(t), nil
	}
	return reflect.Value{}, fmt.Errorf("value has type %s; should be %s", v.Type(), t)
}

func index(item reflect.Value, indexes ...reflect.Value) (reflect.Value, error) {
	item = indirectInterface(item)
	if !item.IsValid() {
		return reflect.Value{}, errors.New("index of untyped nil")
	}
	for _, i := range indexes {
		i = indirectInterface(i)
		var isNil bool
		if item, isNil = indirect(item); isNil {
			return reflect.Value{}, errors.New("index of nil pointer")
		}
		switch item.Kind() {
		case reflect.Array, reflect.Slice, reflect.String:
			x, err := indexArg(i, item.Len())
			if err != nil {
				return reflect.Value{}, err
			}
			item = item.Index(x) // x == Len panics, and the panic is the error, as in text/template

		case reflect.Map:
			k, err := prepareArg(i, item.Type().Key())
			if err != nil {
				return reflect.Value{}, err
			}
			if x := item.MapIndex(k); x.IsValid() {
				item = x
			} else {
				item = reflect.Zero(item.Type().Elem())
			}
		default:
			return reflect.Value{}, fmt.Errorf("can't index item of type %s", item.Type())
		}
	}
	return item, nil
}

func slice(item reflect.Value, indexes ...reflect.Value) (reflect.Value, error) {
	item = indirectInterface(item)
	if !item.IsValid() {
		return reflect.Value{}, errors.New("slice of untyped nil")
	}
	var isNil bool
	if item, isNil = indirect(item); isNil {
		return reflect.Value{}, errors.New("slice of nil pointer")
	}
	if len(indexes) > 3 {
		return reflect.Value{}, fmt.Errorf("too many slice indexes: %d", len(indexes))
	}
	var limit int
	switch item.Kind() {
	case reflect.String:
		if len(indexes) == 3 {
			return reflect.Value{}, errors.New("cannot 3-index slice a string")
		}
		limit = item.Len()
	case reflect.Array, reflect.Slice:
		limit = item.Cap()
	default:
		return reflect.Value{}, fmt.Errorf("can't slice item of type %s", item.Type())
	}
	idx := [3]int{0, item.Len()}
	for i, x := range indexes {
		n, err := indexArg(x, limit)
		if err != nil {
			return reflect.Value{}, err
		}
		idx[i] = n
	}
	if idx[0] > idx[1] {
		return reflect.Value{}, fmt.Errorf("invalid slice index: %d > %d", idx[0], idx[1])
	}
	if len(indexes) < 3 {
		return item.Slice(idx[0], idx[1]), nil
	}
	if idx[1] > idx[2] {
		return reflect.Value{}, fmt.Errorf("invalid slice index: %d > %d", idx[1], idx[2])
	}
	return item.Slice3(idx[0], idx[1], idx[2]), nil
}

func length(item reflect.Value) (int, error) {
	item, isNil := indirect(item)
	if isNil {
		return 0, errors.New("len of nil pointer")
	}
	switch item.Kind() {
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Slice, reflect.String:
		return item.Len(), nil
	}
	return 0, fmt.Errorf("len of type %s", item.Type())
}

// callFunc is the call builtin: fn(args...), fn given by a value.
func callFunc(name string, fn reflect.Value, args ...reflect.Value) (reflect.Value, error) {
	fn = indirectInterface(fn)
	if !fn.IsValid() {
		return reflect.Value{}, errors.New("call of nil")
	}
	typ := fn.Type()
	if typ.Kind() != reflect.Func {
		return reflect.Value{}, fmt.Errorf("non-function %s of type %s", name, typ)
	}
	if !goodFunc(typ) {
		return reflect.Value{}, fmt.Errorf("function %s has %d return values; should be 1 or 2", name, typ.NumOut())
	}
	numIn := typ.NumIn()
	var ddd reflect.Type
	if typ.IsVariadic() {
		if len(args) < numIn-1 {
			return reflect.Value{}, fmt.Errorf("wrong number of args for %s: got %d want at least %d", name, len(args), numIn-1)
		}
		ddd = typ.In(numIn - 1).Elem()
	} else if len(args) != numIn {
		return reflect.Value{}, fmt.Errorf("wrong number of args for %s: got %d want %d", name, len(args), numIn)
	}
	argv := make([]reflect.Value, len(args))
	for i, a := range args {
		a = indirectInterface(a)
		t := ddd
		if !typ.IsVariadic() || i < numIn-1 {
			t = typ.In(i)
		}
		var err error
		if argv[i], err = prepareArg(a, t); err != nil {
			return reflect.Value{}, fmt.Errorf("arg %d: %w", i, err)
		}
	}
	return safeCall(fn, argv)
}
