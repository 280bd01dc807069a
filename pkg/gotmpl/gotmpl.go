// Package gotmpl executes Go text templates, parsed by text/template, with
// the semantics of text/template's own executor but without looking methods
// up by a name only known at run time.
//
// Why: text/template calls reflect.Value.MethodByName with the name a
// template gives. When a binary can reach that call, Go's linker can no
// longer drop any exported method of any type that is ever stored in an
// interface, because a template might call it. In istiod that kept 36 MB of
// otherwise dead code (every generated getter, validator and apply
// configuration of Envoy's and Kubernetes' APIs), about 12 MiB of it
// resident. This executor calls methods from a fixed list of names
// (Methods), each looked up with a constant name, which the linker can
// follow, and reads protobuf getters (GetX) as the field X, which is what
// they return.
//
// Everything else follows text/template: fields, map keys, variables,
// pipelines, if/else/with/range/break/continue, template and block, the
// builtin functions, missing map keys printed as "<no value>", argument
// conversion, and error messages of the same form.
package gotmpl

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"text/template"
	"text/template/parse"
)

// Template is a parsed template and the templates it defines, ready to run.
type Template struct {
	name  string
	trees map[string]*parse.Tree
	funcs map[string]reflect.Value
}

// New prepares t, already parsed with funcs (the same map given to
// t.Funcs), for Execute. Templates t defines with define or block are
// reachable by name, as in t. A missing map key is always nothing
// ("<no value>" when printed), text/template's default: t's missingkey
// option cannot be read and is not followed. A Template may be executed by
// many goroutines at once.
func New(t *template.Template, funcs template.FuncMap) (*Template, error) {
	x := &Template{name: t.Name(), trees: map[string]*parse.Tree{}, funcs: map[string]reflect.Value{}}
	for _, d := range t.Templates() {
		if d.Tree != nil {
			x.trees[d.Name()] = d.Tree
		}
	}
	if t.Tree != nil {
		x.trees[t.Name()] = t.Tree
	}
	for name, fn := range funcs {
		v := reflect.ValueOf(fn)
		if v.Kind() != reflect.Func {
			return nil, fmt.Errorf("template %q: function %q is a %s, not a function", t.Name(), name, v.Kind())
		}
		if !goodFunc(v.Type()) {
			return nil, fmt.Errorf("template %q: function %q returns %d values; want 1, or 2 with an error second", t.Name(), name, v.Type().NumOut())
		}
		x.funcs[name] = v
	}
	return x, nil
}

// Execute writes the template applied to data to w. On an error part of
// the output may have been written, as with text/template.
func (t *Template) Execute(w io.Writer, data any) (err error) {
	tree := t.trees[t.name]
	if tree == nil || tree.Root == nil {
		return fmt.Errorf("template: %q is an incomplete or empty template", t.name)
	}
	value, ok := data.(reflect.Value)
	if !ok {
		value = reflect.ValueOf(data)
	}
	s := &state{tmpl: t, name: t.name, tree: tree, w: w, vars: []variable{{"$", value}}}
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(execError); ok {
				err = e.err
				return
			}
			panic(r)
		}
	}()
	s.walk(value, tree.Root)
	return nil
}

// errorType and the other reflect types the executor checks against.
var (
	errorType       = reflect.TypeFor[error]()
	fmtStringerType = reflect.TypeFor[fmt.Stringer]()
	reflectValueTyp = reflect.TypeFor[reflect.Value]()
)

// execError carries an execution error up the walk, as a panic.
type execError struct{ err error }

// ExecError is an error that happened while running a template (not in
// a function it called, whose error is wrapped as is).
type ExecError struct {
	Name string // the template being run
	Err  error
}

func (e ExecError) Error() string { return e.Err.Error() }
func (e ExecError) Unwrap() error { return e.Err }

// errWalkBreak and errWalkContinue end one iteration of a range.
var (
	errWalkBreak    = errors.New("break")
	errWalkContinue = errors.New("continue")
)
