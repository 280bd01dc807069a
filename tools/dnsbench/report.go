package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"
)

// row is one measurement in the report.
type row struct {
	set, server string
	rate        int // offered load of a latency run
	res         result
	up          result  // the upstream probed beside a latency run (zero: none)
	burnt       float64 // cores burned beside it
}

// report collects the runs and renders them as Markdown.
type report struct {
	o               options
	load, loadAfter string
	max, half       []row
	baseline        map[string]string // case name -> the server it is compared with
}

func (r *report) add(rows *[]row, set, server string, rate int, res result) {
	*rows = append(*rows, row{set: set, server: server, rate: rate, res: res})
}

// addHalf records a half-load run with what was measured beside it.
func (r *report) addHalf(set, server string, rate int, res, up result, burnt float64) {
	r.half = append(r.half, row{set: set, server: server, rate: rate, res: res, up: up, burnt: burnt})
}

// runs returns the maximum-rate results of one server on one set.
func (r *report) runs(set, server string) []result {
	var out []result
	for _, x := range r.max {
		if x.set == set && x.server == server {
			out = append(out, x.res)
		}
	}
	return out
}

// median returns the run with the median QPS (with its CPU per query), and
// the summed losses of all runs.
func (r *report) median(set, server string) result {
	runs := r.runs(set, server)
	if len(runs) == 0 {
		return result{}
	}
	lost := 0
	for _, x := range runs {
		lost += x.lost
	}
	slices.SortFunc(runs, func(a, b result) int {
		switch {
		case a.qps < b.qps:
			return -1
		case a.qps > b.qps:
			return 1
		}
		return 0
	})
	m := runs[len(runs)/2]
	m.lost = lost
	return m
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Microsecond)) }

func (r *report) write(w io.Writer) {
	o := r.o
	fmt.Fprintf(w, "%d names per set; dnsperf -c %d -T %d -q %d; runs of %v; load average %s before, %s after.\n\n",
		o.names, o.clients, o.threads, o.outstanding, o.duration, r.load, r.loadAfter)
	fmt.Fprintf(w, "Maximum rate (dnsperf unthrottled), median of %d alternating runs; CPU is the server process's user+system time per answered query:\n\n", o.rounds)
	fmt.Fprintln(w, "| names | server | QPS (median) | min-max | vs baseline (last row of the case) | lost (all runs) | server CPU µs/query |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	seen := map[string]bool{}
	for _, x := range r.max {
		if seen[x.set+x.server] {
			continue
		}
		seen[x.set+x.server] = true
		m := r.median(x.set, x.server)
		runs := r.runs(x.set, x.server)
		lo, hi := runs[0].qps, runs[0].qps
		for _, y := range runs {
			lo, hi = min(lo, y.qps), max(hi, y.qps)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f-%.0f | %.2fx | %d | %s |\n", x.set, x.server, m.qps, lo, hi,
			m.qps/r.median(x.set, r.baseline[x.set]).qps, m.lost, us(m.cpuPerQuery))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Latency with every server of a case offered the same load, half the baseline's median maximum (dnsperf -Q; percentiles of the per-query latencies from -v):")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\"Upstream p99\" is that of a probe asking the upstream itself (%d QPS, -q %d) through the middle half of the run; \"burned\" the cores a process beside the server kept busy.\n\n", probeRate, probeOutstanding)
	fmt.Fprintln(w, "| names | server | offered QPS | achieved QPS | lost | p50 ms | p99 ms | p99.9 ms | max ms | upstream p99 ms | burned |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.half {
		fmt.Fprintf(w, "| %s | %s | %d | %.0f | %d | %s | %s | %s | %s | %s | %s |\n", x.set, x.server, x.rate, x.res.qps,
			x.res.lost, ms(x.res.p50), ms(x.res.p99), ms(x.res.p999), ms(x.res.max), probed(x.up), burned(x.burnt))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Latency at half load, median of the %d rounds above; the ratio is of the median p99s:\n\n", o.rounds)
	fmt.Fprintln(w, "| names | server | p50 ms (median) | p99 ms (median) | p99 min-max | p99 vs baseline | upstream p99 ms (median) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	seen = map[string]bool{}
	for _, x := range r.half {
		if seen[x.set+x.server] {
			continue
		}
		seen[x.set+x.server] = true
		p50, p99, lo, hi := r.latency(x.set, x.server)
		_, base, _, _ := r.latency(x.set, r.baseline[x.set])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s-%s | %.2fx | %s |\n", x.set, x.server, ms(p50), ms(p99), ms(lo), ms(hi),
			float64(p99)/float64(base), probed(r.upstreamP99(x.set, x.server)))
	}
}

// probed renders a probe's p99, or "-" when there was none.
func probed(up result) string {
	if up.sent == 0 {
		return "-"
	}
	return ms(up.p99)
}

// burned renders the cores burned beside a run, or "-".
func burned(cores float64) string {
	if cores == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f cores", cores)
}

// upstreamP99 returns the probe result with the median p99 over one
// server's half-load runs on one set (zero when none was probed).
func (r *report) upstreamP99(set, server string) result {
	var ups []result
	for _, x := range r.half {
		if x.set == set && x.server == server && x.up.sent > 0 {
			ups = append(ups, x.up)
		}
	}
	if len(ups) == 0 {
		return result{}
	}
	slices.SortFunc(ups, func(a, b result) int { return cmp.Compare(a.p99, b.p99) })
	return ups[len(ups)/2]
}

// latency returns the median p50 and p99 of one server's half-load runs on
// one set, and the smallest and largest p99.
func (r *report) latency(set, server string) (p50, p99, lo, hi time.Duration) {
	var p50s, p99s []time.Duration
	for _, x := range r.half {
		if x.set == set && x.server == server {
			p50s, p99s = append(p50s, x.res.p50), append(p99s, x.res.p99)
		}
	}
	if len(p99s) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(p50s)
	slices.Sort(p99s)
	return p50s[len(p50s)/2], p99s[len(p99s)/2], p99s[0], p99s[len(p99s)-1]
}
