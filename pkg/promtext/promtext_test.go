package promtext

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func text(t *testing.T, r *Registry) string {
	t.Helper()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() []Metric
		want  string
	}{{
		name:  "empty registry",
		build: func() []Metric { return nil },
		want:  "",
	}, {
		name: "vectors without series are left out",
		build: func() []Metric {
			return []Metric{NewCounterVec("a_total", "A.", "x"), NewHistogramVec("b_seconds", "B.", []float64{1}, "x")}
		},
		want: "",
	}, {
		name:  "counter at zero",
		build: func() []Metric { return []Metric{NewCounter("c_total", "Some help.")} },
		want:  "# HELP c_total Some help.\n# TYPE c_total counter\nc_total 0\n",
	}, {
		name: "counters sorted by name, large values as Prometheus writes them",
		build: func() []Metric {
			b, a := NewCounter("b_total", "B."), NewCounter("a_total", "A.")
			a.Add(123456)
			b.Add(1234567)
			return []Metric{b, a}
		},
		want: "# HELP a_total A.\n# TYPE a_total counter\na_total 123456\n" +
			"# HELP b_total B.\n# TYPE b_total counter\nb_total 1.234567e+06\n",
	}, {
		name: "help escaped",
		build: func() []Metric {
			return []Metric{NewCounter("c_total", `back\slash "quoted"`+"\nsecond line")}
		},
		want: `# HELP c_total back\\slash "quoted"\nsecond line` + "\n# TYPE c_total counter\nc_total 0\n",
	}, {
		name: "labels written by name, children sorted by value, values escaped",
		build: func() []Metric {
			v := NewCounterVec("req_total", "Requests.", "server", "protocol")
			v.With("b", "udp").Inc()
			v.With("a", "udp").Add(2)
			v.With(`back\slash`, `quo"te`).Inc()
			v.With("new\nline", "tcp").Inc()
			return []Metric{v}
		},
		want: "# HELP req_total Requests.\n# TYPE req_total counter\n" +
			`req_total{protocol="quo\"te",server="back\\slash"} 1` + "\n" +
			`req_total{protocol="tcp",server="new\nline"} 1` + "\n" +
			`req_total{protocol="udp",server="a"} 2` + "\n" +
			`req_total{protocol="udp",server="b"} 1` + "\n",
	}, {
		name: "curried counter",
		build: func() []Metric {
			v := NewCounterVec("fail_total", "Failures.", "server", "reason")
			s := v.Curry("10.0.0.1:53")
			s.With("timeout").Inc()
			s.With("rcode_SERVFAIL").Add(3)
			return []Metric{v}
		},
		want: "# HELP fail_total Failures.\n# TYPE fail_total counter\n" +
			`fail_total{reason="rcode_SERVFAIL",server="10.0.0.1:53"} 3` + "\n" +
			`fail_total{reason="timeout",server="10.0.0.1:53"} 1` + "\n",
	}, {
		name: "histogram",
		build: func() []Metric {
			h := NewHistogram("d_seconds", "Durations.", []float64{0.0005, 0.25, 1, 2.5})
			for _, v := range []float64{0.25, 0.5, 2, 8} {
				h.Observe(v)
			}
			return []Metric{h}
		},
		want: "# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n" +
			`d_seconds_bucket{le="0.0005"} 0` + "\n" +
			`d_seconds_bucket{le="0.25"} 1` + "\n" +
			`d_seconds_bucket{le="1"} 2` + "\n" +
			`d_seconds_bucket{le="2.5"} 3` + "\n" +
			`d_seconds_bucket{le="+Inf"} 4` + "\n" +
			"d_seconds_sum 10.75\nd_seconds_count 4\n",
	}, {
		name: "histogram vector, an explicit +Inf bound, infinite and NaN observations",
		build: func() []Metric {
			v := NewHistogramVec("d_seconds", "Durations.", []float64{1e-05, 1, math.Inf(+1)}, "server")
			v.With("b").Observe(math.Inf(+1))
			v.With("a").Observe(math.NaN())
			v.With("a").Observe(0)
			v.With("c").Observe(math.Inf(-1))
			return []Metric{v}
		},
		want: "# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n" +
			`d_seconds_bucket{server="a",le="1e-05"} 1` + "\n" +
			`d_seconds_bucket{server="a",le="1"} 1` + "\n" +
			`d_seconds_bucket{server="a",le="+Inf"} 2` + "\n" +
			`d_seconds_sum{server="a"} NaN` + "\n" +
			`d_seconds_count{server="a"} 2` + "\n" +
			`d_seconds_bucket{server="b",le="1e-05"} 0` + "\n" +
			`d_seconds_bucket{server="b",le="1"} 0` + "\n" +
			`d_seconds_bucket{server="b",le="+Inf"} 1` + "\n" +
			`d_seconds_sum{server="b"} +Inf` + "\n" +
			`d_seconds_count{server="b"} 1` + "\n" +
			`d_seconds_bucket{server="c",le="1e-05"} 1` + "\n" +
			`d_seconds_bucket{server="c",le="1"} 1` + "\n" +
			`d_seconds_bucket{server="c",le="+Inf"} 1` + "\n" +
			`d_seconds_sum{server="c"} -Inf` + "\n" +
			`d_seconds_count{server="c"} 1` + "\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			if err := r.Register(tc.build()...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, text(t, r)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAppendFloat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {2.5, "2.5"}, {0.0005, "0.0005"},
		{1e-05, "1e-05"}, {123456, "123456"}, {1e6, "1e+06"}, {1234567, "1.234567e+06"},
		{math.Inf(+1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	} {
		if got := string(appendFloat(nil, tc.f)); got != tc.want {
			t.Errorf("appendFloat(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestRegister(t *testing.T) {
	r := NewRegistry()
	a := NewCounter("a_total", "A.")
	if err := r.Register(a); err != nil {
		t.Fatal(err)
	}
	err := r.Register(NewCounterVec("a_total", "Another A.", "x"))
	if !errors.Is(err, ErrAlreadyRegistered) || !strings.Contains(err.Error(), `"a_total"`) {
		t.Errorf("a second a_total: %v, want ErrAlreadyRegistered naming it", err)
	}
	// All or none: b is not registered when c clashes with a.
	b := NewCounter("b_total", "B.")
	if err := r.Register(b, NewCounter("a_total", "A again.")); !errors.Is(err, ErrAlreadyRegistered) {
		t.Errorf("batch with a clash: %v", err)
	}
	if err := r.Register(NewCounter("c_total", "C."), NewCounter("c_total", "C.")); !errors.Is(err, ErrAlreadyRegistered) {
		t.Errorf("batch with the same name twice: %v", err)
	}
	if got := text(t, r); got != "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n" {
		t.Errorf("after failed registrations:\n%s", got)
	}
	// Unregister leaves another metric of the same name alone, and frees the name.
	r.Unregister(NewCounter("a_total", "A."))
	if err := r.Register(a); !errors.Is(err, ErrAlreadyRegistered) {
		t.Errorf("a was unregistered by another counter of its name: %v", err)
	}
	r.Unregister(a, b)
	if got := text(t, r); got != "" {
		t.Errorf("after Unregister:\n%s", got)
	}
	if err := r.Register(b, a); err != nil {
		t.Errorf("register again after Unregister: %v", err)
	}
}

func TestRegisterInvalid(t *testing.T) {
	v := NewCounterVec("v_total", "V.", "server", "reason")
	for name, m := range map[string]Metric{
		"metric name":         NewCounter("1abc", "x"),
		"empty name":          NewCounter("", "x"),
		"name with a dash":    NewCounter("a-b", "x"),
		"label name":          NewCounterVec("a_total", "x", "a:b"),
		"reserved label":      NewCounterVec("a_total", "x", "__name"),
		"duplicate label":     NewCounterVec("a_total", "x", "a", "a"),
		"le in a histogram":   NewHistogramVec("h", "x", []float64{1}, "le"),
		"unsorted buckets":    NewHistogram("h", "x", []float64{1, 0.5}),
		"repeated bucket":     NewHistogram("h", "x", []float64{1, 1}),
		"NaN bucket":          NewHistogram("h", "x", []float64{math.NaN()}),
		"a vector's child":    v.With("a", "b"),
		"a curried vector":    v.Curry("a"),
		"a histogram's child": NewHistogramVec("h", "x", []float64{1}, "a").With("x"),
	} {
		if err := NewRegistry().Register(m); err == nil {
			t.Errorf("%s: registered", name)
		}
	}
	if err := NewRegistry().Register(NewCounterVec("ns:sub_total", "x", "le", "_a")); err != nil {
		t.Errorf("valid names: %v", err)
	}
}

func TestWith(t *testing.T) {
	v := NewCounterVec("v_total", "V.", "server", "reason")
	c := v.With("s", "r")
	if v.With("s", "r") != c || v.Curry("s").With("r") != c || v.Curry("s").Curry("r").With() != c {
		t.Error("the same label values gave different counters")
	}
	if v.With("s", "r2") == c || v.With("sr", "") == c || v.With("", "sr") == c {
		t.Error("different label values gave the same counter")
	}
	for name, f := range map[string]func(){
		"too few values":        func() { v.With("s") },
		"too many values":       func() { v.With("s", "r", "x") },
		"too many curried":      func() { v.Curry("a", "b", "c") },
		"curried then too many": func() { v.Curry("a").With("b", "c") },
		"invalid UTF-8":         func() { v.With("s", "\xff") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
