package gotmpl_test

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"text/template"

	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/gotmpl"
)

// stringer has a String method with a value receiver, ptrStringer one
// with a pointer receiver.
type stringer struct{ n int }

func (s stringer) String() string { return fmt.Sprintf("S%d", s.n) }

type ptrStringer struct{ n int }

func (p *ptrStringer) String() string { return fmt.Sprintf("P%d", p.n) }

type person struct {
	Name  string
	Age   int
	Tags  []string
	Boss  *person
	inner int
}

// data is what every case runs on.
type data struct {
	S, Empty   string
	I          int
	U          uint8
	F          float64
	B          bool
	L          []string
	None       []int
	M          map[string]any
	MS         map[string]string
	MI         map[int]string
	Any        any
	P          person
	PP         *person
	NilP       *person
	Str        stringer
	PStr       ptrStringer
	Err        error
	Fn         func(int) int
	PC         *meshconfig.ProxyConfig
	NilPC      *meshconfig.ProxyConfig
	Meta       metav1.ObjectMeta
	Q          resource.Quantity
	Arr        [3]int
	NilMap     map[string]string
	Iface      fmt.Stringer
	NilIface   fmt.Stringer
	Bytes      []byte
	EmptyIface any
}

func newData() *data {
	d := &data{
		S: "hello", I: 3, U: 3, F: 1.5, B: true,
		L:     []string{"a", "b", "c"},
		M:     map[string]any{"a": 1, "b": "two", "nested": map[string]any{"k": "v", "n": nil}, "list": []any{1, "x"}, "t": true, "z": 0},
		MS:    map[string]string{"b": "2", "a": "1", "c": ""},
		MI:    map[int]string{3: "c", 1: "a", 2: "b"},
		Any:   map[string]any{"k": "v"},
		P:     person{Name: "ann", Age: 40, Tags: []string{"x"}},
		PP:    &person{Name: "bob", Boss: &person{Name: "cy"}},
		Str:   stringer{7},
		PStr:  ptrStringer{8},
		Err:   errors.New("boom"),
		Fn:    func(i int) int { return i * 2 },
		PC:    &meshconfig.ProxyConfig{DiscoveryAddress: "istiod:15012", Concurrency: wrapperspb.Int32(2), ProxyMetadata: map[string]string{"FOO": "bar"}, InterceptionMode: meshconfig.ProxyConfig_TPROXY},
		Meta:  metav1.ObjectMeta{Name: "pod", Namespace: "ns", Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a/b": "c"}},
		Q:     resource.MustParse("1500m"),
		Arr:   [3]int{1, 2, 3},
		Iface: stringer{9},
		Bytes: []byte("hi"),
	}
	// A message sets its internal state when first used; printing it
	// whole shows that state, so set it before either executor runs.
	d.PC.ProtoReflect()
	return d
}

func funcs() template.FuncMap {
	return template.FuncMap{
		"upper":  strings.ToUpper,
		"fails":  func() (string, error) { return "", errors.New("it failed") },
		"panics": func() string { panic("oops") },
		"sum": func(xs ...int) int {
			n := 0
			for _, x := range xs {
				n += x
			}
			return n
		},
		"pair": func(a string, b ...any) string { return fmt.Sprint(a, b) },
		"default": func(def, v any) any {
			if v == nil || v == "" {
				return def
			}
			return v
		},
		"toMap":    func() map[string]any { return map[string]any{"x": 1} },
		"nothing":  func() any { return nil },
		"ptr":      func() *person { return &person{Name: "p"} },
		"takesPtr": func(p *person) string { return p.Name },
		"takesVal": func(p person) string { return p.Name },
		"takesInt": func(i int64) int64 { return i },
		"takesU":   func(u uint) uint { return u },
		"takesF":   func(f float32) float32 { return f },
		"takesB":   func(b bool) bool { return !b },
		"takesMap": func(m map[string]string) int { return len(m) },
	}
}

// run executes text with both executors on d and returns their outputs
// and errors; skip is true when text/template cannot parse text or
// panicked.
func run(t testing.TB, text string, d *data) (want, got string, wantErr, gotErr error, skip bool) {
	t.Helper()
	fm := funcs()
	tt, err := template.New("t").Funcs(fm).Parse(text)
	if err != nil {
		return "", "", nil, nil, true
	}
	var wb bytes.Buffer
	func() {
		defer func() {
			if r := recover(); r != nil {
				skip = true
			}
		}()
		wantErr = tt.Execute(&wb, d)
	}()
	if skip {
		return "", "", nil, nil, true
	}
	// A fresh parse: text/template's Execute may have changed nothing, but
	// the executors must not share state.
	tt2, err := template.New("t").Funcs(fm).Parse(text)
	if err != nil {
		t.Fatalf("second parse: %v", err)
	}
	x, err := gotmpl.New(tt2, fm)
	if err != nil {
		t.Fatalf("gotmpl.New: %v", err)
	}
	var gb bytes.Buffer
	gotErr = x.Execute(&gb, d)
	return wb.String(), gb.String(), wantErr, gotErr, false
}

// hint is how this executor's errors mention the methods it calls.
var hint = regexp.MustCompile(` \(if \S+ is a method: templates here may call only [^)]*\)`)

// unsupported reports whether err is this executor refusing a method
// call text/template would make.
func unsupported(err error) bool {
	return err != nil && hint.MatchString(err.Error())
}

// errText is err's message without the hint.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return hint.ReplaceAllString(err.Error(), "")
}

// cases are templates over data, each covering a rule of text/template's
// executor: they must render, or fail, exactly as text/template does.
var cases = []string{
	`plain text`, `{{.S}} {{.I}} {{.U}} {{.F}} {{.B}} {{.Empty}}`, `{{.L}} {{.None}} {{.M}} {{.MS}} {{.Arr}} {{.Bytes}}`,
	`{{.NilP}}`, `{{.NilMap}}`, `{{.NilIface}}`, `{{.EmptyIface}}`, `{{.Iface}}`,
	`{{.M.a}} {{.M.b}} {{.M.missing}} {{.M.nested.k}} {{.M.nested.n}} {{.M.nested.missing}}`,
	`{{.MS.a}}|{{.MS.c}}|{{.MS.zz}}`, `{{.Any.k}}`, `{{.Any.zz}}`,
	`{{index .M "a"}} {{index .M "zz"}} {{index .MS "zz"}} {{index .L 1}} {{index .M "list" 1}} {{index .MI 2}}`,
	`{{index .L 9}}`, `{{index .L -1}}`, `{{index .L "x"}}`, `{{index .NilP 1}}`, `{{index nil 1}}`, `{{index .I 1}}`, `{{index .S 1}}`,
	`{{len .L}} {{len .M}} {{len .S}} {{len .Arr}}`, `{{len .NilP}}`, `{{len .I}}`, `{{len .M.missing}}`,
	`{{slice .S 1 3}} {{slice .L 1}} {{slice .L 0 1 2}} {{slice .Arr 1}}`, `{{slice .S 3 1}}`, `{{slice .S 0 1 2}}`, `{{slice .I}}`,
	`{{printf "%d-%s-%v" .I .S .B}}`, `{{print 1 2 "a" "b" 3}}`, `{{println .S .I}}`, `{{.S | printf "%q"}}`, `{{"x" | printf "%s%s" "y"}}`,
	`{{if .B}}y{{else}}n{{end}}`, `{{if not .B}}y{{else if .I}}i{{else}}n{{end}}`, `{{if .M.missing}}y{{else}}n{{end}}`,
	`{{if and .B .I}}{{and .B .I}}{{end}} {{and 0 1}} {{and 1 "" 2}} {{or 0 "" "x"}} {{or 0 ""}} {{or .M.missing .S}}`,
	`{{and .B (fails)}}`, `{{or .B (fails)}}`, `{{.I | and .B}}`, `{{"" | or 0}}`,
	`{{with .PP}}{{.Name}}{{.Boss.Name}}{{end}}`, `{{with .NilP}}x{{else}}e{{end}}`, `{{with $x := .S}}{{$x}}{{.}}{{end}}`,
	`{{with .NilP}}a{{else with .S}}{{.}}{{end}}`, `{{with .None}}a{{else with .Empty}}b{{else}}c{{end}}`,
	`{{range .L}}{{.}},{{end}}`, `{{range $i, $e := .L}}{{$i}}={{$e}};{{end}}`, `{{range $e := .L}}{{$e}}{{end}}`,
	`{{range $k, $v := .M}}{{$k}}:{{$v}} {{end}}`, `{{range $k, $v := .MS}}{{$k}}={{$v}} {{end}}`, `{{range $k, $v := .MI}}{{$k}}={{$v}} {{end}}`,
	`{{range .None}}x{{else}}empty{{end}}`, `{{range .NilMap}}x{{else}}nil{{end}}`, `{{range .M.missing}}x{{else}}none{{end}}`,
	`{{range 3}}{{.}}{{end}}`, `{{range $i := 2}}{{$i}}{{end}}`, `{{range $i, $j := 2}}{{end}}`, `{{range .S}}{{end}}`, `{{range .I}}{{.}}{{end}}`,
	`{{range .L}}{{if eq . "b"}}{{break}}{{end}}{{.}}{{end}}`, `{{range .L}}{{if eq . "b"}}{{continue}}{{end}}{{.}}{{end}}`,
	`{{$x := 1}}{{$x = 2}}{{$x}}`, `{{$x := .S}}{{range .L}}{{$x}}{{$x = .}}{{end}}{{$x}}`, `{{range $i, $e := .L}}{{$i = 5}}{{end}}`,
	`{{define "u"}}[{{.}}]{{end}}{{template "u" .S}}{{template "u"}}`, `{{block "b" .I}}<{{.}}>{{end}}`,
	`{{define "r"}}{{if .}}{{.}}{{template "r" (slice . 1)}}{{end}}{{end}}{{template "r" "abc"}}`,
	`{{template "nope"}}`, `{{define "v"}}{{$}}{{end}}{{$x := 1}}{{template "v" .I}}`,
	`{{eq .I 3}} {{eq .I 3 4}} {{eq .I 4 3}} {{eq .S "hello"}} {{eq .U .I}} {{eq .I .U}} {{eq .F 1.5}} {{eq .B true}}`,
	`{{eq .I .S}}`, `{{eq .I}}`, `{{eq .M.missing .M.missing}}`, `{{eq .NilP .NilP}}`, `{{eq .PP .PP}}`, `{{eq .L .L}}`, `{{eq .P .P}}`,
	`{{eq .Iface .Iface}}`, `{{eq .M.a 1}}`, `{{eq .M.b "two"}}`,
	`{{lt .I 5}} {{le 1 1}} {{gt "b" "a"}} {{ge 2 3}} {{ne .B true}} {{lt -1 .U}} {{lt .U -1}} {{le 2.5 .F}}`,
	`{{lt .B true}}`, `{{lt .L 1}}`, `{{lt 1 "a"}}`, `{{gt .I .S}}`,
	`{{.P.Name}} {{.P.Age}} {{.P.Tags}} {{.PP.Boss.Name}} {{.PP.Boss.Boss}}`, `{{.NilP.Name}}`, `{{.PP.Boss.Boss.Name}}`, `{{.P.inner}}`, `{{.P.Nope}}`,
	`{{.Str}} {{.Str.String}} {{.PStr}} {{.PStr.String}} {{.Err}} {{.Err.Error}} {{.Iface.String}}`, `{{.NilIface.String}}`,
	`{{html "<a href='x'>&</a>"}} {{js "a'b\"c<d>"}} {{urlquery "a b&c"}} {{html .I}}`,
	`{{call .Fn 2}}`, `{{call .Fn}}`, `{{call .S}}`, `{{call nothing}}`, `{{.Fn}}`, `{{.Fn 2}}`,
	`{{upper .S}} {{.S | upper}} {{upper "x" | printf "%s!"}}`, `{{fails}}`, `{{panics}}`, `{{upper}}`, `{{upper 1}}`, `{{upper .S .S}}`,
	`{{sum}} {{sum 1 2 3}} {{3 | sum 1 2}} {{pair "a"}} {{pair "a" 1 nil}} {{"z" | pair "a"}}`, `{{sum "x"}}`, `{{1 | pair}}`,
	`{{default "d" .M.missing}} {{default "d" .S}} {{.M.missing | default "d"}} {{default "d" .Empty}}`,
	`{{toMap.x}} {{(toMap).x}} {{(nothing)}} {{nothing}} {{(ptr).Name}} {{ptr}}`, `{{(nothing).x}}`,
	`{{takesPtr .PP}} {{takesPtr (ptr)}} {{takesVal .P}} {{takesVal .PP}} {{takesPtr .P}}`, `{{takesPtr nil}}`, `{{takesVal nil}}`, `{{takesPtr .NilP}}`, `{{takesVal .NilP}}`,
	`{{takesInt 5}} {{takesU 5}} {{takesF 1.5}} {{takesB true}} {{takesMap .MS}} {{takesMap nil}}`, `{{takesInt 1.5}}`, `{{takesU -1}}`, `{{takesF 1}}`, `{{takesB 1}}`, `{{takesInt "x"}}`, `{{takesInt .S}}`, `{{takesInt .I}}`,
	`{{1.5}} {{0x10}} {{'a'}} {{1e3}} {{true}} {{"s"}} {{1i}} {{0x1p4}} {{-7}}`, `{{nil}}`, `{{true 1}}`, `{{.S 1}}`, `{{. 1}}`, `{{"a" 1}}`,
	`{{(index .L 0)}} {{(.PP).Name}} {{(.PP).Boss.Name}} {{$.S}} {{(.M).nested.k}}`, `{{.I.Foo}}`, `{{.S.Len}}`, `{{.L.x}}`, `{{.M.a.b}}`,
	`{{$}}`, `{{$x := .PP}}{{$x.Name}}{{$x.Boss.Name}}`, `{{$x := .M}}{{$x.nested.k}}`,
	`{{.PC.GetTracing.GetTlsSettings.GetCaCertificates}}|{{.PC.InterceptionMode.String}}|{{.PC.InterceptionMode}}|{{.PC.GetConcurrency.GetValue}}|{{.PC.ProxyMetadata.FOO}}|{{.PC.GetProxyMetadata}}|{{.PC.GetDiscoveryAddress}}`,
	`{{.NilPC.GetTracing}}|{{.NilPC.GetConcurrency.GetValue}}|{{.NilPC.GetDiscoveryAddress}}|{{with .NilPC.GetTracing}}x{{else}}none{{end}}`, `{{.NilPC.DiscoveryAddress}}`,
	`{{.PC.GetConcurrency}}`, `{{.PC.GetConcurrency 1}}`, `{{if .PC.GetHoldApplicationUntilProxyStarts.GetValue}}y{{else}}n{{end}}`,
	`{{.Meta.Name}} {{.Meta.GetName}} {{.Meta.GetNamespace}} {{.Meta.GetLabels}} {{.Meta.GetAnnotations}} {{index .Meta.Annotations "a/b"}}`,
	`{{.Q}} {{.Q.String}} {{.Q.MilliValue}} {{.Q.Value}} {{.Q.IsZero}}`,
	`{{- .S -}}  {{- "  x  " -}}`, `a{{/* comment */}}b`, `{{.S}}{{.S}}`,
}

func TestMatchesTextTemplate(t *testing.T) {
	for _, text := range cases {
		want, got, wantErr, gotErr, skip := run(t, text, newData())
		if skip {
			t.Errorf("%s: text/template cannot parse or panicked; fix the case", text)
			continue
		}
		if wantErr == nil && unsupported(gotErr) {
			t.Errorf("%s: refused: %v", text, gotErr)
			continue
		}
		if got != want || errText(gotErr) != errText(wantErr) {
			t.Errorf("%s:\n got %q, %v\nwant %q, %v", text, got, gotErr, want, wantErr)
		}
	}
}

// bigNumber finds literals large enough to make a range run long.
var bigNumber = regexp.MustCompile(`[0-9]{4,}|0[xXbBoO]|[eEpP][0-9]`)

// FuzzMatchesTextTemplate runs random templates with both executors: any
// template text/template runs must give the same output and error here,
// unless it calls a method this executor does not call (which is refused
// with an error that says so).
func FuzzMatchesTextTemplate(f *testing.F) {
	for _, c := range cases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 300 || strings.Contains(text, "define") || strings.Contains(text, "block") || strings.Contains(text, "template") || bigNumber.MatchString(text) {
			return // recursion and long ranges only burn time
		}
		want, got, wantErr, gotErr, skip := run(t, text, newData())
		if skip || unsupported(gotErr) {
			return // the method text/template would call is not one of Methods
		}
		if got != want || errText(gotErr) != errText(wantErr) {
			t.Errorf("%q:\n got %q, %v\nwant %q, %v", text, got, gotErr, want, wantErr)
		}
	})
}

// TestConcurrentExecute: one Template serves many renders at once (the
// injection webhook's case); run with -race.
func TestConcurrentExecute(t *testing.T) {
	fm := funcs()
	tt := template.Must(template.New("t").Funcs(fm).Parse(`{{define "p"}}{{.Name}}{{end}}{{range $i, $e := .L}}{{$i}}{{template "p" $.P}}{{upper $e}}{{end}}`))
	x, err := gotmpl.New(tt, fm)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 100 {
				var b bytes.Buffer
				if err := x.Execute(&b, newData()); err != nil {
					errs <- err
					return
				}
				if b.String() != "0annA1annB2annC" {
					errs <- fmt.Errorf("rendered %q", b.String())
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
