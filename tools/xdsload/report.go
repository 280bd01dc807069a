package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
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
	if cfg.agentStreams {
		kind += " (each with a NameTable stream beside)"
	}
	if cfg.ndsOnADS {
		kind += " (the NameTable on the ADS stream, as the agents do)"
	}
	fmt.Fprintf(w, "istiod xDS load (control plane %s, mesh from %s, TLS %t): %d services x %d endpoints in %d namespaces, %d %s clients on %d gRPC connections on loopback, EDS debounce %t, push concurrency %d; load average (1, 5, 15 min) before %.2f %.2f %.2f, after %.2f %.2f %.2f\n\n",
		cfg.controlPlane, cfg.source, cfg.tls, cfg.services, cfg.endpoints, len(cfg.spread.namespaces()), r.clients, kind, r.conns, cfg.edsDebounce, cfg.pushConcurrency,
		r.load0[0], r.load0[1], r.load0[2], r.load[0], r.load[1], r.load[2])
	if len(cfg.args) > 0 {
		fmt.Fprintf(w, "istiod flags added: %s\n\n", strings.Join(cfg.args, " "))
	}
	if len(cfg.env) > 0 {
		fmt.Fprintf(w, "istiod environment: %s\n\n", strings.Join(cfg.env, " "))
	}
	fmt.Fprintf(w, "| measure | result |\n| --- | --- |\n")
	fmt.Fprintf(w, "| initial sync of all clients (CDS+EDS+LDS+RDS) | %s, istiod CPU %.1f s, %.0f KiB per client |\n",
		ms(r.connect), r.connectCPU.Seconds(), float64(r.bytesPerClient)/1024)
	fmt.Fprintf(w, "| streams the control plane ended, opened again as Envoy does (whole run) | %d |\n", r.reopened)
	for _, p := range r.phases {
		n := len(p.samples)
		if n == 0 {
			continue
		}
		per := float64(n) * float64(r.clients) * 1024
		fmt.Fprintf(w, "| %s, %d runs: time until the last client | p50 %s, p99 %s, max %s; per client p50 %s, p99 %s; istiod CPU %.3f s, load generator CPU %.3f s per change; per client per change %.1f KiB received (%s), %.1f KiB of ACKs |\n",
			p.name, n, ms(percentile(p.samples, .5)), ms(percentile(p.samples, .99)), ms(slices.Max(p.samples)),
			ms(percentile(p.clients, .5)), ms(percentile(p.clients, .99)), p.cpu.Seconds()/float64(n), p.selfCPU.Seconds()/float64(n),
			float64(p.recvBytes())/per, byType(p.typeBytes, per), float64(p.ackBytes)/per)
	}
	fmt.Fprintf(w, "| istiod RSS before clients / after the initial sync / at the end / peak | %.0f / %.0f / %.0f / %.0f MiB |\n",
		mib(r.baseRSS), mib(r.syncRSS), mib(r.rss), mib(r.peak))
	if cfg.rest > 0 {
		fmt.Fprintf(w, "| istiod RSS at rest (%v after the last change) | %.0f MiB (file-backed %.0f MiB: the binary's pages; anonymous %.0f MiB: heap and stacks) |\n",
			cfg.rest, mib(r.rest.rss), mib(r.rest.file), mib(r.rest.anon))
	}
	fmt.Fprintf(w, "| per client: istiod CPU of the initial sync, RSS above the baseline (at the end) | %.2f ms, %.0f KiB |\n",
		perClientMs(r.connectCPU, r.clients), r.rssPerClient()/1024)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// typeNames name the types in the order of types.
var typeNames = [5]string{"CDS", "EDS", "LDS", "RDS", "NDS"}

// byType lists the KiB of each type received, of those received at all,
// per client and change (per: their count times 1024).
func byType(b [5]int64, per float64) string {
	var parts []string
	for i, n := range b {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", typeNames[i], float64(n)/per))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func perClientMs(d time.Duration, n int) float64 { return d.Seconds() * 1000 / float64(n) }

// rssPerClient is istiod's RSS at the end above its RSS before any client,
// per client, in bytes.
func (r *results) rssPerClient() float64 { return float64(r.rss-r.baseRSS) / float64(r.clients) }

// printCurve prints one row per client count, so the growth per sidecar
// shows; nothing for a single count.
func printCurve(w io.Writer, cfg config, all []*results) {
	if len(all) < 2 {
		return
	}
	fmt.Fprintf(w, "scaling (%d services x %d endpoints in %d namespaces, %d streams per gRPC connection):\n\n", cfg.services, cfg.endpoints, len(cfg.spread.namespaces()), cfg.streamsPerConn)
	fmt.Fprintf(w, "| clients | initial sync | istiod CPU per sidecar: sync / full push / endpoint change | full push p50 | endpoint change p50 / p99 | RSS end (peak) | RSS per sidecar | load average before / after |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range all {
		perPush := func(p *phase) string {
			if len(p.samples) == 0 {
				return "—"
			}
			return fmt.Sprintf("%.3f ms", perClientMs(p.cpu/time.Duration(len(p.samples)), r.clients))
		}
		p50 := func(p *phase) string {
			if len(p.samples) == 0 {
				return "—"
			}
			return ms(percentile(p.samples, .5))
		}
		full, epc := r.phases[0], r.phases[2]
		fmt.Fprintf(w, "| %d | %s | %.2f ms / %s / %s | %s | %s / %s | %.0f (%.0f) MiB | %.0f KiB | %.2f / %.2f |\n",
			r.clients, ms(r.connect), perClientMs(r.connectCPU, r.clients), perPush(full), perPush(epc),
			p50(full), p50(epc), ms(percentile(epc.samples, .99)), mib(r.rss), mib(r.peak), r.rssPerClient()/1024, r.load0[0], r.load[0])
	}
}
