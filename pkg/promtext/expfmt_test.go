package promtext_test

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/skiff-mesh/skiff/pkg/promtext"
)

// parse reads text with Prometheus' own parser.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("expfmt cannot parse:\n%s\n%v", text, err)
	}
	return mfs
}

func writeText(t *testing.T, r *promtext.Registry) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParsed: Prometheus' parser reads back the names, types, labels and
// values written, escaped label values included.
func TestParsed(t *testing.T) {
	r := promtext.NewRegistry()
	c := promtext.NewCounter("lone_total", "A lone counter.")
	v := promtext.NewCounterVec("req_total", "Requests\\by \"kind\"\nsecond line.", "server", "protocol")
	h := promtext.NewHistogramVec("dur_seconds", "Durations.", []float64{0.001, 0.5, 2}, "server")
	if err := r.Register(c, v, h); err != nil {
		t.Fatal(err)
	}
	c.Add(1 << 40)
	v.With("a\\b", "q\"uote").Add(2)
	v.With("new\nline", "udp").Inc()
	h.With("x").Observe(0.25)
	h.With("x").Observe(4)
	got := parse(t, writeText(t, r))

	type sample struct {
		labels map[string]string
		value  float64
	}
	flat := map[string][]sample{}
	types := map[string]dto.MetricType{}
	for name, mf := range got {
		types[name] = mf.GetType()
		for _, m := range mf.Metric {
			ls := map[string]string{}
			for _, l := range m.Label {
				ls[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				flat[name] = append(flat[name], sample{ls, m.Counter.GetValue()})
			case dto.MetricType_HISTOGRAM:
				for _, b := range m.Histogram.Bucket {
					bl := map[string]string{"le": fmt.Sprint(b.GetUpperBound())}
					for k, v := range ls {
						bl[k] = v
					}
					flat[name+"_bucket"] = append(flat[name+"_bucket"], sample{bl, float64(b.GetCumulativeCount())})
				}
				flat[name+"_sum"] = append(flat[name+"_sum"], sample{ls, m.Histogram.GetSampleSum()})
				flat[name+"_count"] = append(flat[name+"_count"], sample{ls, float64(m.Histogram.GetSampleCount())})
			}
		}
	}
	if got, want := got["req_total"].GetHelp(), "Requests\\by \"kind\"\nsecond line."; got != want {
		t.Errorf("help %q, want %q", got, want)
	}
	wantTypes := map[string]dto.MetricType{"lone_total": dto.MetricType_COUNTER, "req_total": dto.MetricType_COUNTER, "dur_seconds": dto.MetricType_HISTOGRAM}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	x := map[string]string{"server": "x"}
	want := map[string][]sample{
		"lone_total": {{map[string]string{}, 1 << 40}},
		"req_total": {
			{map[string]string{"server": "a\\b", "protocol": "q\"uote"}, 2},
			{map[string]string{"server": "new\nline", "protocol": "udp"}, 1},
		},
		"dur_seconds_bucket": {
			{map[string]string{"server": "x", "le": "0.001"}, 0},
			{map[string]string{"server": "x", "le": "0.5"}, 1},
			{map[string]string{"server": "x", "le": "2"}, 1},
			{map[string]string{"server": "x", "le": "+Inf"}, 2},
		},
		"dur_seconds_sum":   {{x, 4.25}},
		"dur_seconds_count": {{x, 2}},
	}
	if diff := cmp.Diff(want, flat, cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("parsed samples (-want +got):\n%s", diff)
	}
}

// TestSameAsClientGolang: the same metrics with the same observations,
// written by client_golang and by promtext, parse to the same families.
func TestSameAsClientGolang(t *testing.T) {
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	ours := promtext.NewRegistry()
	oc := promtext.NewCounter("dns_mesh_answers_total", "Mesh answers.")
	ov := promtext.NewCounterVec("dns_upstream_failures_total", "Failures, by \"reason\".\nAnd a \\ second line.", "server", "reason")
	oh := promtext.NewHistogramVec("dns_upstream_request_duration_seconds", "Durations.", buckets, "server")
	ol := promtext.NewHistogram("lone_seconds", "A lone histogram.", []float64{1, 2})
	oe := promtext.NewCounterVec("empty_total", "No series.", "x")
	if err := ours.Register(oc, ov, oh, ol, oe); err != nil {
		t.Fatal(err)
	}
	theirs := prometheus.NewRegistry()
	tc := prometheus.NewCounter(prometheus.CounterOpts{Name: "dns_mesh_answers_total", Help: "Mesh answers."})
	tv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dns_upstream_failures_total", Help: "Failures, by \"reason\".\nAnd a \\ second line."}, []string{"server", "reason"})
	th := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dns_upstream_request_duration_seconds", Help: "Durations.", Buckets: buckets}, []string{"server"})
	tl := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lone_seconds", Help: "A lone histogram.", Buckets: []float64{1, 2}})
	te := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "empty_total", Help: "No series."}, []string{"x"})
	theirs.MustRegister(tc, tv, th, tl, te)

	oc.Add(1234567)
	tc.Add(1234567)
	for i, reason := range []string{"timeout", "rcode_SERVFAIL", `odd"reason\`, "new\nline", "timeout"} {
		server := []string{"10.0.0.2:53", "10.0.0.1:53", "[fd00::1]:53"}[i%3]
		ov.Curry(server).With(reason).Add(uint64(i + 1))
		tv.MustCurryWith(prometheus.Labels{"server": server}).WithLabelValues(reason).Add(float64(i + 1))
	}
	for i := range 200 {
		v := float64(i) * 0.0371
		server := []string{"10.0.0.2:53", "10.0.0.1:53"}[i%2]
		oh.With(server).Observe(v)
		th.WithLabelValues(server).Observe(v)
	}
	for _, v := range []float64{0.5, 1, 1.5, 2, 100, math.Inf(+1)} {
		ol.Observe(v)
		tl.Observe(v)
	}

	var want bytes.Buffer
	mfs, err := theirs.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&want, mf); err != nil {
			t.Fatal(err)
		}
	}
	got := writeText(t, ours)
	if diff := cmp.Diff(parse(t, want.Bytes()), parse(t, got), protocmp.Transform()); diff != "" {
		t.Errorf("client_golang (-) and promtext (+) differ:\n%s", diff)
	}
	if !bytes.Equal(want.Bytes(), got) {
		t.Logf("same families, different text:\n%s", cmp.Diff(want.String(), string(got)))
	}
}

// TestConcurrent is for -race: updates, new children and scrapes at once.
func TestConcurrent(t *testing.T) {
	r := promtext.NewRegistry()
	c := promtext.NewCounter("c_total", "C.")
	v := promtext.NewCounterVec("v_total", "V.", "server", "reason")
	h := promtext.NewHistogramVec("h_seconds", "H.", []float64{0.5, 1}, "server")
	if err := r.Register(c, v, h); err != nil {
		t.Fatal(err)
	}
	const workers, n = 4, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := fmt.Sprint("s", w%2)
			for i := range n {
				c.Inc()
				v.Curry(s).With(fmt.Sprint("r", i%3)).Inc()
				h.With(s).Observe(0.75)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			parse(t, writeText(t, r))
		}
	})
	wg.Wait()
	mfs := parse(t, writeText(t, r))
	if got := mfs["c_total"].Metric[0].Counter.GetValue(); got != workers*n {
		t.Errorf("c_total %v, want %d", got, workers*n)
	}
	var total float64
	for _, m := range mfs["v_total"].Metric {
		total += m.Counter.GetValue()
	}
	if total != workers*n || len(mfs["v_total"].Metric) != 6 {
		t.Errorf("v_total: %d series adding to %v, want 6 adding to %d", len(mfs["v_total"].Metric), total, workers*n)
	}
	for _, m := range mfs["h_seconds"].Metric {
		if got := m.Histogram.GetSampleCount(); got != workers/2*n || m.Histogram.GetSampleSum() != 0.75*workers/2*n {
			t.Errorf("h_seconds %v: count %d sum %v", m.Label, got, m.Histogram.GetSampleSum())
		}
	}
}

func BenchmarkCounterInc(b *testing.B) {
	c := promtext.NewCounterVec("c_total", "C.", "protocol").With("udp")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkCounterVecWith(b *testing.B) {
	v := promtext.NewCounterVec("c_total", "C.", "server", "reason").Curry("10.0.0.1:53")
	v.With("timeout")
	b.ReportAllocs()
	for b.Loop() {
		v.With("timeout").Inc()
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := promtext.NewHistogramVec("h_seconds", "H.", []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "server").With("10.0.0.1:53")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		v := 0.0
		for pb.Next() {
			h.Observe(v)
			v += 0.001
		}
	})
}

// TestNoAllocs: the hot path allocates nothing, a found child included.
func TestNoAllocs(t *testing.T) {
	c := promtext.NewCounter("c_total", "C.")
	v := promtext.NewCounterVec("v_total", "V.", "server", "reason").Curry("10.0.0.1:53")
	h := promtext.NewHistogramVec("h_seconds", "H.", []float64{0.5, 1}, "server")
	v.With("timeout")
	h.With("10.0.0.1:53")
	reason := strings.Repeat("x", 20)
	for name, f := range map[string]func(){
		"Inc":           func() { c.Inc() },
		"Add":           func() { c.Add(3) },
		"Observe":       func() { h.With("10.0.0.1:53").Observe(0.7) },
		"curried With":  func() { v.With("timeout").Inc() },
		"With, dynamic": func() { v.With(reason[:7]).Inc() },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}
