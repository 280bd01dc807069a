package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// row is one measurement in the report.
type row struct {
	set, server string
	rate        int // offered load for latency runs
	res         result
}

// report collects the runs and renders them as Markdown.
type report struct {
	duration        time.Duration
	names           int
	load, loadAfter string
	p               dnsperf
	max, half       []row
}

func (r *report) find(set, server string) result {
	for _, x := range r.max {
		if x.set == set && x.server == server {
			return x.res
		}
	}
	return result{}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "Runs of %v each, %d names per set, dnsperf -c %d -T %d -q %d; load average %s before, %s after.\n\n",
		r.duration, r.names, r.p.clients, r.p.threads, r.p.outstanding, r.load, r.loadAfter)
	fmt.Fprintln(w, "Maximum rate (dnsperf unthrottled):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| names | server | QPS | vs dnsmasq | lost | avg latency ms |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, x := range r.max {
		ratio := x.res.qps / r.find(x.set, "dnsmasq").qps
		fmt.Fprintf(w, "| %s | %s | %.0f | %.2fx | %d | %s |\n", x.set, x.server, x.res.qps, ratio, x.res.lost, ms(x.res.avg))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Latency at half of each server's own maximum rate (dnsperf -Q, per-query latencies from -v):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| names | server | offered QPS | achieved QPS | lost | p50 ms | p99 ms | p99.9 ms | max ms |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.half {
		fmt.Fprintf(w, "| %s | %s | %d | %.0f | %d | %s | %s | %s | %s |\n", x.set, x.server, x.rate, x.res.qps,
			x.res.lost, ms(x.res.p50), ms(x.res.p99), ms(x.res.p999), ms(x.res.max))
	}
	fmt.Fprintln(w, strings.Repeat("", 0))
}
