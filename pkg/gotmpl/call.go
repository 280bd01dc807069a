package gotmpl

import (
	"fmt"
	"reflect"
	"text/template/parse"
)

// goodFunc reports whether a function or method can be called from a
// template: one result, or two with an error second.
func goodFunc(typ reflect.Type) bool {
	switch typ.NumOut() {
	case 1:
		return true
	case 2:
		return typ.Out(1) == errorType
	}
	return false
}

// evalCall calls fun with the arguments the template gives (args[0] is the
// function's own node) and the pipeline's final value, converted to the
// parameters' types as text/template converts them.
func (s *state) evalCall(dot, fun reflect.Value, builtin bool, node parse.Node, name string, args []parse.Node, final reflect.Value) reflect.Value {
	if args != nil {
		args = args[1:]
	}
	typ := fun.Type()
	numIn := len(args)
	if !isMissing(final) {
		numIn++
	}
	numFixed := len(args)
	if typ.IsVariadic() {
		numFixed = typ.NumIn() - 1
		if numIn < numFixed {
			s.errorf("wrong number of args for %s: want at least %d got %d", name, typ.NumIn()-1, len(args))
		}
	} else if numIn != typ.NumIn() {
		s.errorf("wrong number of args for %s: want %d got %d", name, typ.NumIn(), numIn)
	}
	if !goodFunc(typ) {
		s.errorf("can't call method/function %q with %d results", name, typ.NumOut())
	}
	unwrap := func(v reflect.Value) reflect.Value {
		if v.Type() == reflectValueTyp {
			v = v.Interface().(reflect.Value)
		}
		return v
	}
	if builtin && (name == "and" || name == "or") {
		argType := typ.In(0)
		var v reflect.Value
		for _, a := range args {
			v = s.evalArg(dot, argType, a).Interface().(reflect.Value)
			if truth(v) == (name == "or") {
				return v
			}
		}
		if !isMissing(final) {
			v = unwrap(s.validateType(final, argType))
		}
		return v
	}
	argv := make([]reflect.Value, numIn)
	i := 0
	for ; i < numFixed && i < len(args); i++ {
		argv[i] = s.evalArg(dot, typ.In(i), args[i])
	}
	if typ.IsVariadic() {
		et := typ.In(typ.NumIn() - 1).Elem()
		for ; i < len(args); i++ {
			argv[i] = s.evalArg(dot, et, args[i])
		}
	}
	if !isMissing(final) {
		t := typ.In(typ.NumIn() - 1)
		if typ.IsVariadic() {
			if numIn-1 < numFixed {
				t = typ.In(numIn - 1)
			} else {
				t = t.Elem()
			}
		}
		argv[i] = s.validateType(final, t)
	}
	if builtin && name == "call" {
		callee := final.String()
		if len(args) > 0 {
			callee = args[0].String()
		}
		argv = append([]reflect.Value{reflect.ValueOf(callee)}, argv...)
		fun = reflect.ValueOf(callFunc)
	}
	v, err := safeCall(fun, argv)
	if err != nil {
		s.at(node)
		s.errorf("error calling %s: %w", name, err)
	}
	return unwrap(v)
}

// safeCall calls fun, turning a panic into an error.
func safeCall(fun reflect.Value, args []reflect.Value) (v reflect.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	out := fun.Call(args)
	if len(out) == 2 && !out[1].IsNil() {
		return out[0], out[1].Interface().(error)
	}
	return out[0], nil
}

func canBeNil(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return true
	case reflect.Struct:
		return typ == reflectValueTyp
	}
	return false
}

// validateType makes v fit typ, as an argument: nil to typ's zero, one
// step of pointer indirection either way, or an error.
func (s *state) validateType(v reflect.Value, typ reflect.Type) reflect.Value {
	if !v.IsValid() {
		if typ == nil {
			return reflect.ValueOf(nil)
		}
		if canBeNil(typ) {
			return reflect.Zero(typ)
		}
		s.errorf("invalid value; expected %s", typ)
	}
	if typ == reflectValueTyp && v.Type() != typ {
		return reflect.ValueOf(v)
	}
	if typ != nil && !v.Type().AssignableTo(typ) {
		if v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
			if v.Type().AssignableTo(typ) {
				return v
			}
		}
		switch {
		case v.Kind() == reflect.Pointer && v.Type().Elem().AssignableTo(typ):
			v = v.Elem()
			if !v.IsValid() {
				s.errorf("dereference of nil pointer of type %s", typ)
			}
		case reflect.PointerTo(v.Type()).AssignableTo(typ) && v.CanAddr():
			v = v.Addr()
		default:
			s.errorf("wrong type for value; expected %s; got %s", typ, v.Type())
		}
	}
	return v
}

// evalArg evaluates n as an argument of type typ.
func (s *state) evalArg(dot reflect.Value, typ reflect.Type, n parse.Node) reflect.Value {
	s.at(n)
	switch a := n.(type) {
	case *parse.DotNode:
		return s.validateType(dot, typ)
	case *parse.NilNode:
		if canBeNil(typ) {
			return reflect.Zero(typ)
		}
		s.errorf("cannot assign nil to %s", typ)
	case *parse.FieldNode:
		return s.validateType(s.evalFieldNode(dot, a, []parse.Node{n}, missing), typ)
	case *parse.VariableNode:
		return s.validateType(s.evalVariableNode(dot, a, nil, missing), typ)
	case *parse.PipeNode:
		return s.validateType(s.evalPipeline(dot, a), typ)
	case *parse.IdentifierNode:
		return s.validateType(s.evalFunction(dot, a, a, nil, missing), typ)
	case *parse.ChainNode:
		return s.validateType(s.evalChainNode(dot, a, nil, missing), typ)
	}
	if typ == nil {
		s.errorf("can't handle %s for arg of unknown type", n)
	}
	switch typ.Kind() {
	case reflect.Bool:
		b, ok := n.(*parse.BoolNode)
		return s.literal(typ, n, "bool", ok, func(v reflect.Value) { v.SetBool(b.True) })
	case reflect.Complex64, reflect.Complex128:
		c, ok := n.(*parse.NumberNode)
		return s.literal(typ, n, "complex", ok && c.IsComplex, func(v reflect.Value) { v.SetComplex(c.Complex128) })
	case reflect.Float32, reflect.Float64:
		f, ok := n.(*parse.NumberNode)
		return s.literal(typ, n, "float", ok && f.IsFloat, func(v reflect.Value) { v.SetFloat(f.Float64) })
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := n.(*parse.NumberNode)
		return s.literal(typ, n, "integer", ok && i.IsInt, func(v reflect.Value) { v.SetInt(i.Int64) })
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u, ok := n.(*parse.NumberNode)
		return s.literal(typ, n, "unsigned integer", ok && u.IsUint, func(v reflect.Value) { v.SetUint(u.Uint64) })
	case reflect.String:
		str, ok := n.(*parse.StringNode)
		return s.literal(typ, n, "string", ok, func(v reflect.Value) { v.SetString(str.Text) })
	case reflect.Interface:
		if typ.NumMethod() == 0 {
			return s.evalEmptyInterface(dot, n)
		}
	case reflect.Struct:
		if typ == reflectValueTyp {
			return reflect.ValueOf(s.evalEmptyInterface(dot, n))
		}
	}
	s.errorf("can't handle %s for arg of type %s", n, typ)
	return reflect.Value{}
}

// literal is a value of typ set from literal node n, or an error that
// says what kind of literal the parameter wanted.
func (s *state) literal(typ reflect.Type, n parse.Node, want string, ok bool, set func(reflect.Value)) reflect.Value {
	if !ok {
		s.errorf("expected %s; found %s", want, n)
	}
	v := reflect.New(typ).Elem()
	set(v)
	return v
}

// constant is the value of a literal or of dot, where any type goes.
func (s *state) constant(dot reflect.Value, n parse.Node) (reflect.Value, bool) {
	switch a := n.(type) {
	case *parse.BoolNode:
		return reflect.ValueOf(a.True), true
	case *parse.DotNode:
		return dot, true
	case *parse.NumberNode:
		return s.idealConstant(a), true
	case *parse.StringNode:
		return reflect.ValueOf(a.Text), true
	}
	return reflect.Value{}, false
}

// evalEmptyInterface evaluates an argument given where any type goes.
func (s *state) evalEmptyInterface(dot reflect.Value, n parse.Node) reflect.Value {
	s.at(n)
	if v, ok := s.constant(dot, n); ok {
		return v
	}
	switch a := n.(type) {
	case *parse.FieldNode:
		return s.evalFieldNode(dot, a, nil, missing)
	case *parse.IdentifierNode:
		return s.evalFunction(dot, a, a, nil, missing)
	case *parse.NilNode:
		s.errorf("evalEmptyInterface: nil (can't happen)")
	case *parse.VariableNode:
		return s.evalVariableNode(dot, a, nil, missing)
	case *parse.PipeNode:
		return s.evalPipeline(dot, a)
	case *parse.ChainNode:
		return s.evalChainNode(dot, a, nil, missing)
	}
	s.errorf("can't handle assignment of %s to empty interface argument", n)
	return reflect.Value{}
}
