package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func (r *results) print(w io.Writer, cfg config) {
	kind := "SotW"
	if cfg.delta {
		kind = "delta"
	}
	fmt.Fprintf(w, "istiod xDS load: %d services x %d endpoints, %d %s clients on loopback, EDS debounce %t, push concurrency %d\n\n",
		cfg.services, cfg.endpoints, cfg.clients, kind, cfg.edsDebounce, cfg.pushConcurrency)
	fmt.Fprintf(w, "| measure | result |\n| --- | --- |\n")
	fmt.Fprintf(w, "| initial sync of all clients (CDS+EDS+LDS+RDS) | %s, istiod CPU %.1f s, %.0f KiB per client |\n",
		ms(r.connect), r.connectCPU.Seconds(), float64(r.bytesPerClient)/1024)
	for _, p := range r.phases {
		n := len(p.samples)
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s, %d runs: time until the last client | p50 %s, p99 %s, max %s; per client p50 %s, p99 %s; istiod CPU %.2f s, load generator CPU %.2f s per change |\n",
			p.name, n, ms(percentile(p.samples, .5)), ms(percentile(p.samples, .99)), ms(slices.Max(p.samples)),
			ms(percentile(p.clients, .5)), ms(percentile(p.clients, .99)), p.cpu.Seconds()/float64(n), p.selfCPU.Seconds()/float64(n))
	}
	fmt.Fprintf(w, "| istiod RSS at the end / peak | %.0f MiB / %.0f MiB |\n", float64(r.rss)/(1<<20), float64(r.peak)/(1<<20))
}
