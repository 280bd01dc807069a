package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// dnsperf runs Debian's dnsperf with fixed client settings.
type dnsperf struct {
	clients, threads, outstanding int
}

// result is what one dnsperf run measured.
type result struct {
	sent, lost int
	qps        float64
	avg        time.Duration
	// Percentiles from per-query latencies (only for rate-limited runs).
	p50, p99, p999, max time.Duration
	// cpuPerQuery is the server process's CPU time per completed query.
	cpuPerQuery time.Duration
}

// args returns the dnsperf command line for a run; d == 0 means one pass
// through the file.
func (p dnsperf) args(s *server, file string, d time.Duration, rate int) []string {
	a := []string{"-s", s.ip, "-p", strconv.Itoa(s.port), "-d", file,
		"-c", strconv.Itoa(p.clients), "-T", strconv.Itoa(p.threads), "-q", strconv.Itoa(p.outstanding)}
	if d == 0 {
		return append(a, "-n", "1")
	}
	a = append(a, "-l", strconv.Itoa(int(d.Seconds())))
	if rate > 0 {
		a = append(a, "-Q", strconv.Itoa(rate), "-v")
	}
	return a
}

// run runs dnsperf once against s: through the file once (d == 0, a
// warm-up), for d at full speed, or for d at rate queries per second with
// per-query latencies.
func (p dnsperf) run(ctx context.Context, s *server, file string, d time.Duration, rate int) (result, error) {
	// Output goes to a file, not a pipe: with -v it is ~100k lines a
	// second, which this process (the proxy's) should not have to copy.
	f, err := os.CreateTemp("", "dnsperf-*.out")
	if err != nil {
		return result{}, fmt.Errorf("dnsperf output file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.CommandContext(ctx, "dnsperf", p.args(s, file, d, rate)...)
	cmd.Stdout, cmd.Stderr = f, f
	cpu0, err := s.cpu()
	if err != nil {
		return result{}, err
	}
	runErr := cmd.Run()
	cpu1, err := s.cpu()
	if err != nil {
		return result{}, err
	}
	out, err := os.ReadFile(f.Name())
	if runErr != nil || err != nil {
		return result{}, fmt.Errorf("dnsperf against %s: %w %w\n%s", s.name, runErr, err, out)
	}
	r, err := parse(out)
	if done := r.sent - r.lost; done > 0 {
		r.cpuPerQuery = (cpu1 - cpu0) / time.Duration(done)
	}
	return r, err
}

// parse reads dnsperf's summary and, with -v, its per-query lines
// ("> NOERROR name A 0.000123").
func parse(out []byte) (result, error) {
	var r result
	var lat []time.Duration
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "> ") && len(f) >= 5:
			if s, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				lat = append(lat, time.Duration(s*float64(time.Second)))
			}
		case strings.HasPrefix(line, "Queries sent:"):
			r.sent, _ = strconv.Atoi(f[2])
		case strings.HasPrefix(line, "Queries lost:"):
			r.lost, _ = strconv.Atoi(f[2])
		case strings.HasPrefix(line, "Queries per second:"):
			r.qps, _ = strconv.ParseFloat(f[3], 64)
		case strings.HasPrefix(line, "Average Latency (s):"):
			s, _ := strconv.ParseFloat(f[3], 64)
			r.avg = time.Duration(s * float64(time.Second))
		}
	}
	if r.sent == 0 {
		return r, fmt.Errorf("could not read dnsperf output:\n%s", out)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		r.p50, r.p99, r.p999, r.max = pct(0.50), pct(0.99), pct(0.999), lat[len(lat)-1]
	}
	return r, nil
}
