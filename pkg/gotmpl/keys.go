package gotmpl

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
)

// sortedKeys are m's keys in the order text/template ranges over a map
// (fmt's order): numbers by value, strings in byte order, false before
// true. Keys of other kinds are refused, not ranged in some other order.
func sortedKeys(m reflect.Value) ([]reflect.Value, error) {
	keys := m.MapKeys()
	kinds := map[reflect.Kind]bool{}
	for i, k := range keys {
		if k.Kind() == reflect.Interface && !k.IsNil() {
			keys[i] = k.Elem()
		}
		kinds[keys[i].Kind()] = true
	}
	if len(kinds) > 1 {
		return nil, fmt.Errorf("range over %s: keys of more than one kind are not supported", m.Type())
	}
	var c func(a, b reflect.Value) int
	for k := range kinds {
		switch k {
		case reflect.String:
			c = func(a, b reflect.Value) int { return cmp.Compare(a.String(), b.String()) }
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			c = func(a, b reflect.Value) int { return cmp.Compare(a.Int(), b.Int()) }
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			c = func(a, b reflect.Value) int { return cmp.Compare(a.Uint(), b.Uint()) }
		case reflect.Float32, reflect.Float64:
			c = func(a, b reflect.Value) int { return cmp.Compare(a.Float(), b.Float()) }
		case reflect.Bool:
			c = func(a, b reflect.Value) int {
				return cmp.Compare(boolInt(a.Bool()), boolInt(b.Bool()))
			}
		default:
			return nil, fmt.Errorf("range over %s: keys of kind %s are not supported", m.Type(), k)
		}
	}
	if c != nil {
		slices.SortStableFunc(keys, c)
	}
	// MapIndex needs the keys as the map holds them.
	for i, k := range keys {
		if m.Type().Key().Kind() == reflect.Interface {
			keys[i] = reflect.New(m.Type().Key()).Elem()
			keys[i].Set(k)
		}
	}
	return keys, nil
}
