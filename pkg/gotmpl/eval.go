package gotmpl

import (
	"reflect"
	"strings"
	"text/template/parse"
)

// missingType marks "no final value" in a pipeline, which differs from
// an invalid (nil) value.
type missingType struct{}

var missing = reflect.ValueOf(missingType{})

func isMissing(v reflect.Value) bool { return v.IsValid() && v.Type() == missing.Type() }

func (s *state) evalPipeline(dot reflect.Value, pipe *parse.PipeNode) reflect.Value {
	if pipe == nil {
		return reflect.Value{}
	}
	s.at(pipe)
	v := missing
	for _, cmd := range pipe.Cmds {
		v = s.evalCommand(dot, cmd, v)
		if v.Kind() == reflect.Interface && v.Type().NumMethod() == 0 {
			v = reflect.ValueOf(v.Interface())
		}
	}
	for _, d := range pipe.Decl {
		if pipe.IsAssign {
			s.setVar(d.Ident[0], v)
		} else {
			s.push(d.Ident[0], v)
		}
	}
	return v
}

func (s *state) notAFunction(args []parse.Node, final reflect.Value) {
	if len(args) > 1 || !isMissing(final) {
		s.errorf("can't give argument to non-function %s", args[0])
	}
}

func (s *state) evalCommand(dot reflect.Value, cmd *parse.CommandNode, final reflect.Value) reflect.Value {
	first := cmd.Args[0]
	switch n := first.(type) {
	case *parse.FieldNode:
		return s.evalFieldNode(dot, n, cmd.Args, final)
	case *parse.ChainNode:
		return s.evalChainNode(dot, n, cmd.Args, final)
	case *parse.IdentifierNode:
		return s.evalFunction(dot, n, cmd, cmd.Args, final)
	case *parse.PipeNode:
		s.notAFunction(cmd.Args, final)
		return s.evalPipeline(dot, n)
	case *parse.VariableNode:
		return s.evalVariableNode(dot, n, cmd.Args, final)
	}
	s.at(first)
	s.notAFunction(cmd.Args, final)
	if v, ok := s.constant(dot, first); ok {
		return v
	}
	if _, ok := first.(*parse.NilNode); ok {
		s.errorf("nil is not a command")
	}
	s.errorf("can't evaluate command %q", first)
	return reflect.Value{}
}

// idealConstant is a number literal given where any type goes: int if it
// is one, float64 if written as one, complex128.
func (s *state) idealConstant(c *parse.NumberNode) reflect.Value {
	s.at(c)
	isHexInt := len(c.Text) > 2 && c.Text[0] == '0' && (c.Text[1] == 'x' || c.Text[1] == 'X') && !strings.ContainsAny(c.Text, "pP")
	isRune := len(c.Text) > 0 && c.Text[0] == '\''
	switch {
	case c.IsComplex:
		return reflect.ValueOf(c.Complex128)
	case c.IsFloat && !isHexInt && !isRune && strings.ContainsAny(c.Text, ".eEpP"):
		return reflect.ValueOf(c.Float64)
	case c.IsInt:
		n := int(c.Int64)
		if int64(n) != c.Int64 {
			s.errorf("%s overflows int", c.Text)
		}
		return reflect.ValueOf(n)
	case c.IsUint:
		s.errorf("%s overflows int", c.Text)
	}
	return reflect.Value{}
}

func (s *state) evalVariableNode(dot reflect.Value, v *parse.VariableNode, args []parse.Node, final reflect.Value) reflect.Value {
	s.at(v)
	value := s.varValue(v.Ident[0])
	if len(v.Ident) == 1 {
		s.notAFunction(args, final)
		return value
	}
	return s.evalFieldChain(dot, value, v, v.Ident[1:], args, final)
}

func (s *state) evalChainNode(dot reflect.Value, chain *parse.ChainNode, args []parse.Node, final reflect.Value) reflect.Value {
	s.at(chain)
	if len(chain.Field) == 0 {
		s.errorf("internal error: no fields in evalChainNode")
	}
	if chain.Node.Type() == parse.NodeNil {
		s.errorf("indirection through explicit nil in %s", chain)
	}
	pipe := s.evalArg(dot, nil, chain.Node)
	return s.evalFieldChain(dot, pipe, chain, chain.Field, args, final)
}

func (s *state) evalFieldNode(dot reflect.Value, f *parse.FieldNode, args []parse.Node, final reflect.Value) reflect.Value {
	s.at(f)
	return s.evalFieldChain(dot, dot, f, f.Ident, args, final)
}

// evalFieldChain evaluates .X.Y.Z on receiver; only the last may take
// arguments.
func (s *state) evalFieldChain(dot, receiver reflect.Value, node parse.Node, ident []string, args []parse.Node, final reflect.Value) reflect.Value {
	n := len(ident)
	for i := range n - 1 {
		receiver = s.evalField(dot, ident[i], node, nil, missing, receiver)
	}
	return s.evalField(dot, ident[n-1], node, args, final, receiver)
}

// evalField is receiver.name: a method (from Methods, or a protobuf
// getter), a struct field or a map key, in text/template's order.
func (s *state) evalField(dot reflect.Value, name string, node parse.Node, args []parse.Node, final, receiver reflect.Value) reflect.Value {
	if !receiver.IsValid() {
		return reflect.Value{}
	}
	typ := receiver.Type()
	receiver, isNil := indirect(receiver)
	if receiver.Kind() == reflect.Interface && isNil {
		s.errorf("nil pointer evaluating %s.%s", typ, name)
	}
	ptr := receiver
	if ptr.Kind() != reflect.Interface && ptr.Kind() != reflect.Pointer && ptr.CanAddr() {
		ptr = ptr.Addr()
	}
	if m := method(ptr, name); m.IsValid() {
		return s.evalCall(dot, m, false, node, name, args, final)
	}
	if g, ok := protoGetter(ptr, name); ok {
		if len(args) > 1 || !isMissing(final) {
			s.errorf("wrong number of args for %s: want 0 got %d", name, len(args)-1+boolInt(!isMissing(final)))
		}
		return g
	}
	hasArgs := len(args) > 1 || !isMissing(final)
	switch receiver.Kind() {
	case reflect.Struct:
		if f, ok := receiver.Type().FieldByName(name); ok {
			field, err := receiver.FieldByIndexErr(f.Index)
			if !f.IsExported() {
				s.errorf("%s is an unexported field of struct type %s", name, typ)
			}
			if err != nil {
				s.errorf("%v", err)
			}
			if hasArgs {
				s.errorf("%s has arguments but cannot be invoked as function", name)
			}
			return field
		}
	case reflect.Map:
		key := reflect.ValueOf(name)
		if key.Type().AssignableTo(receiver.Type().Key()) {
			if hasArgs {
				s.errorf("%s is not a method but has arguments", name)
			}
			return receiver.MapIndex(key)
		}
	case reflect.Pointer:
		if et := receiver.Type().Elem(); et.Kind() == reflect.Struct {
			if _, ok := et.FieldByName(name); !ok {
				break
			}
		}
		if isNil {
			s.errorf("nil pointer evaluating %s.%s", typ, name)
		}
	}
	s.errorf("can't evaluate field %s in type %s%s", name, typ, unsupportedMethodHint(name))
	return reflect.Value{}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *state) evalFunction(dot reflect.Value, node *parse.IdentifierNode, cmd parse.Node, args []parse.Node, final reflect.Value) reflect.Value {
	s.at(node)
	fn, ok := s.tmpl.funcs[node.Ident]
	builtin := false
	if !ok {
		fn, ok = builtins[node.Ident]
		builtin = ok
	}
	if !ok {
		s.errorf("%q is not a defined function", node.Ident)
	}
	return s.evalCall(dot, fn, builtin, cmd, node.Ident, args, final)
}
