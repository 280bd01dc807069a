package gotmpl

import (
	"errors"
	"fmt"
	"reflect"
)

var (
	errBadComparisonType = errors.New("invalid type for comparison")
	errBadComparison     = errors.New("incompatible types for comparison")
	errNoComparison      = errors.New("missing argument for comparison")
)

// kind is a comparison class: values of one class compare with each other.
type kind int

const (
	invalidKind kind = iota
	boolKind
	complexKind
	intKind
	floatKind
	stringKind
	uintKind
)

func basicKind(v reflect.Value) (kind, error) {
	switch v.Kind() {
	case reflect.Bool:
		return boolKind, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intKind, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintKind, nil
	case reflect.Float32, reflect.Float64:
		return floatKind, nil
	case reflect.Complex64, reflect.Complex128:
		return complexKind, nil
	case reflect.String:
		return stringKind, nil
	}
	return invalidKind, errBadComparisonType
}

// isNilValue is true for no value or a nil one.
func isNilValue(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// canCompare: the same kind, or one of them nothing.
func canCompare(a, b reflect.Value) bool {
	return a.Kind() == b.Kind() || a.Kind() == reflect.Invalid || b.Kind() == reflect.Invalid
}

// eq is a == b || a == c || ...
func eq(a reflect.Value, bs ...reflect.Value) (bool, error) {
	a = indirectInterface(a)
	if len(bs) == 0 {
		return false, errNoComparison
	}
	k1, _ := basicKind(a)
	for _, b := range bs {
		b = indirectInterface(b)
		k2, _ := basicKind(b)
		t := false
		if k1 != k2 {
			switch {
			case k1 == intKind && k2 == uintKind:
				t = a.Int() >= 0 && uint64(a.Int()) == b.Uint()
			case k1 == uintKind && k2 == intKind:
				t = b.Int() >= 0 && a.Uint() == uint64(b.Int())
			default:
				if a.IsValid() && b.IsValid() {
					return false, fmt.Errorf("%w: %v and %v", errBadComparison, a.Type(), b.Type())
				}
			}
		} else {
			switch k1 {
			case boolKind:
				t = a.Bool() == b.Bool()
			case complexKind:
				t = a.Complex() == b.Complex()
			case floatKind:
				t = a.Float() == b.Float()
			case intKind:
				t = a.Int() == b.Int()
			case stringKind:
				t = a.String() == b.String()
			case uintKind:
				t = a.Uint() == b.Uint()
			default:
				if !canCompare(a, b) {
					return false, fmt.Errorf("non-comparable types %s: %v, %s: %v", a, a.Type(), b.Type(), b)
				}
				if isNilValue(a) || isNilValue(b) {
					t = isNilValue(b) == isNilValue(a)
				} else {
					if !b.Type().Comparable() {
						return false, fmt.Errorf("non-comparable type %s: %v", b, b.Type())
					}
					t = a.Interface() == b.Interface()
				}
			}
		}
		if t {
			return true, nil
		}
	}
	return false, nil
}

func ne(a, b reflect.Value) (bool, error) {
	e, err := eq(a, b)
	return !e, err
}

func lt(a, b reflect.Value) (bool, error) {
	a = indirectInterface(a)
	k1, err := basicKind(a)
	if err != nil {
		return false, err
	}
	b = indirectInterface(b)
	k2, err := basicKind(b)
	if err != nil {
		return false, err
	}
	if k1 != k2 {
		switch {
		case k1 == intKind && k2 == uintKind:
			return a.Int() < 0 || uint64(a.Int()) < b.Uint(), nil
		case k1 == uintKind && k2 == intKind:
			return b.Int() >= 0 && a.Uint() < uint64(b.Int()), nil
		}
		return false, fmt.Errorf("%w: %v and %v", errBadComparison, a.Type(), b.Type())
	}
	switch k1 {
	case floatKind:
		return a.Float() < b.Float(), nil
	case intKind:
		return a.Int() < b.Int(), nil
	case stringKind:
		return a.String() < b.String(), nil
	case uintKind:
		return a.Uint() < b.Uint(), nil
	}
	return false, errBadComparisonType
}

func le(a, b reflect.Value) (bool, error) {
	if l, err := lt(a, b); l || err != nil {
		return l, err
	}
	return eq(a, b)
}

func gt(a, b reflect.Value) (bool, error) {
	l, err := le(a, b)
	if err != nil {
		return false, err
	}
	return !l, nil
}

func ge(a, b reflect.Value) (bool, error) {
	l, err := lt(a, b)
	if err != nil {
		return false, err
	}
	return !l, nil
}
