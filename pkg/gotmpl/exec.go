package gotmpl

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/template/parse"
)

// maxDepth bounds nested {{template}} calls, as text/template does.
const maxDepth = 100000

// state is one execution: where it writes, the template being walked and
// the variables in scope.
type state struct {
	tmpl  *Template
	name  string // the (defined) template being walked
	tree  *parse.Tree
	w     io.Writer
	node  parse.Node // the node being evaluated, for errors
	vars  []variable
	depth int
}

// variable is a template variable and its value.
type variable struct {
	name  string
	value reflect.Value
}

func (s *state) push(name string, v reflect.Value) { s.vars = append(s.vars, variable{name, v}) }
func (s *state) mark() int                         { return len(s.vars) }
func (s *state) pop(mark int)                      { s.vars = s.vars[:mark] }
func (s *state) setTopVar(n int, v reflect.Value)  { s.vars[len(s.vars)-n].value = v }

// setVar assigns to the innermost variable called name.
func (s *state) setVar(name string, v reflect.Value) {
	for i := s.mark() - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			s.vars[i].value = v
			return
		}
	}
	s.errorf("undefined variable: %s", name)
}

// varValue is the value of the innermost variable called name.
func (s *state) varValue(name string) reflect.Value {
	for i := s.mark() - 1; i >= 0; i-- {
		if s.vars[i].name == name {
			return s.vars[i].value
		}
	}
	s.errorf("undefined variable: %s", name)
	return reflect.Value{}
}

func (s *state) at(n parse.Node) { s.node = n }

// errorf ends the execution with an error that says where, in the form
// text/template uses.
func (s *state) errorf(format string, args ...any) {
	name := strings.ReplaceAll(s.name, "%", "%%")
	if s.node == nil {
		format = fmt.Sprintf("template: %s: %s", name, format)
	} else {
		location, context := s.tree.ErrorContext(s.node)
		format = fmt.Sprintf("template: %s: executing %q at <%s>: %s", location, name, strings.ReplaceAll(context, "%", "%%"), format)
	}
	panic(execError{ExecError{Name: s.name, Err: fmt.Errorf(format, args...)}})
}

// writeError ends the execution with the writer's error, unwrapped.
func (s *state) writeError(err error) { panic(execError{err}) }

// walk runs node with dot as the data.
func (s *state) walk(dot reflect.Value, node parse.Node) {
	s.at(node)
	switch node := node.(type) {
	case *parse.ActionNode:
		v := s.evalPipeline(dot, node.Pipe)
		if len(node.Pipe.Decl) == 0 {
			s.printValue(node, v)
		}
	case *parse.BreakNode:
		panic(errWalkBreak)
	case *parse.ContinueNode:
		panic(errWalkContinue)
	case *parse.CommentNode:
	case *parse.IfNode:
		s.walkIfOrWith(parse.NodeIf, dot, node.Pipe, node.List, node.ElseList)
	case *parse.WithNode:
		s.walkIfOrWith(parse.NodeWith, dot, node.Pipe, node.List, node.ElseList)
	case *parse.ListNode:
		for _, n := range node.Nodes {
			s.walk(dot, n)
		}
	case *parse.RangeNode:
		s.walkRange(dot, node)
	case *parse.TemplateNode:
		s.walkTemplate(dot, node)
	case *parse.TextNode:
		if _, err := s.w.Write(node.Text); err != nil {
			s.writeError(err)
		}
	default:
		s.errorf("unknown node: %s", node)
	}
}

func (s *state) walkIfOrWith(typ parse.NodeType, dot reflect.Value, pipe *parse.PipeNode, list, elseList *parse.ListNode) {
	defer s.pop(s.mark())
	v := s.evalPipeline(dot, pipe)
	truth, ok := isTrue(indirectInterface(v))
	if !ok {
		s.errorf("if/with can't use %v", v)
	}
	switch {
	case truth && typ == parse.NodeWith:
		s.walk(v, list)
	case truth:
		s.walk(dot, list)
	case elseList != nil:
		s.walk(dot, elseList)
	}
}

func (s *state) walkRange(dot reflect.Value, r *parse.RangeNode) {
	s.at(r)
	defer func() {
		if e := recover(); e != nil && e != errWalkBreak {
			panic(e)
		}
	}()
	defer s.pop(s.mark())
	v, _ := indirect(s.evalPipeline(dot, r.Pipe))
	mark := s.mark()
	one := func(index, elem reflect.Value) {
		decl := r.Pipe.Decl
		if len(decl) > 0 {
			switch {
			case r.Pipe.IsAssign && len(decl) > 1:
				s.setVar(decl[0].Ident[0], index)
			case r.Pipe.IsAssign:
				s.setVar(decl[0].Ident[0], elem)
			default:
				s.setTopVar(1, elem)
			}
		}
		if len(decl) > 1 {
			if r.Pipe.IsAssign {
				s.setVar(decl[1].Ident[0], elem)
			} else {
				s.setTopVar(2, index)
			}
		}
		defer s.pop(mark)
		defer func() {
			if e := recover(); e != nil && e != errWalkContinue {
				panic(e)
			}
		}()
		s.walk(elem, r.List)
	}
	ran := false
	switch v.Kind() {
	case reflect.Array, reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			ran = true
			one(reflect.ValueOf(i), v.Index(i))
		}
	case reflect.Map:
		keys, err := sortedKeys(v)
		if err != nil {
			s.errorf("%v", err)
		}
		for _, k := range keys {
			ran = true
			one(k, v.MapIndex(k))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if len(r.Pipe.Decl) > 1 {
			s.errorf("can't use %v to iterate over more than one variable", v)
		}
		for i := range v.Seq() {
			ran = true
			one(reflect.Value{}, i)
		}
	case reflect.Invalid:
	default:
		s.errorf("range can't iterate over %v", v)
	}
	if !ran && r.ElseList != nil {
		s.walk(dot, r.ElseList)
	}
}

func (s *state) walkTemplate(dot reflect.Value, t *parse.TemplateNode) {
	s.at(t)
	tree := s.tmpl.trees[t.Name]
	if tree == nil || tree.Root == nil {
		s.errorf("template %q not defined", t.Name)
	}
	if s.depth == maxDepth {
		s.errorf("exceeded maximum template depth (%v)", maxDepth)
	}
	dot = s.evalPipeline(dot, t.Pipe)
	inner := *s
	inner.depth++
	inner.name, inner.tree = t.Name, tree
	inner.vars = []variable{{"$", dot}}
	inner.walk(dot, tree.Root)
}

// printValue writes v as text/template prints it: fmt's form, through
// pointers, "<no value>" for nothing.
func (s *state) printValue(n parse.Node, v reflect.Value) {
	s.at(n)
	iface, ok := printableValue(v)
	if !ok {
		s.errorf("can't print %s of type %s", n, v.Type())
	}
	if _, err := fmt.Fprint(s.w, iface); err != nil {
		s.writeError(err)
	}
}

func printableValue(v reflect.Value) (any, bool) {
	if v.Kind() == reflect.Pointer {
		v, _ = indirect(v)
	}
	if !v.IsValid() {
		return "<no value>", true
	}
	if !v.Type().Implements(errorType) && !v.Type().Implements(fmtStringerType) {
		if v.CanAddr() && (reflect.PointerTo(v.Type()).Implements(errorType) || reflect.PointerTo(v.Type()).Implements(fmtStringerType)) {
			v = v.Addr()
		} else if k := v.Kind(); k == reflect.Chan || k == reflect.Func {
			return nil, false
		}
	}
	return v.Interface(), true
}
