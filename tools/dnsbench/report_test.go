package main

import (
	"strings"
	"testing"
	"time"
)

// A rate-limited dnsperf run's output as dnsperf -v writes it: per-query
// lines, then the summary.
const dnsperfOut = `DNS Performance Testing Tool
> NOERROR host-1.bench.test A 0.000100
> NOERROR host-2.bench.test A 0.000200
> NOERROR host-3.bench.test A 0.000300
> NOERROR host-4.bench.test A 0.004000
Statistics:

  Queries sent:         4
  Queries completed:    4 (100.00%)
  Queries lost:         0 (0.00%)

  Queries per second:   1000.000000

  Average Latency (s):  0.001150 (min 0.000100, max 0.004000)
`

func TestParse(t *testing.T) {
	r, err := parse([]byte(dnsperfOut))
	if err != nil {
		t.Fatal(err)
	}
	if r.sent != 4 || r.lost != 0 || r.qps != 1000 {
		t.Errorf("sent %d, lost %d, qps %v; want 4, 0, 1000", r.sent, r.lost, r.qps)
	}
	if r.p50 != 300*time.Microsecond || r.p99 != 4*time.Millisecond || r.max != 4*time.Millisecond {
		t.Errorf("p50 %v, p99 %v, max %v; want 300µs, 4ms, 4ms", r.p50, r.p99, r.max)
	}
	if _, err := parse([]byte("dnsperf: invalid option\n")); err == nil {
		t.Error("output without a summary parsed")
	}
}

// The forward case's rows carry the upstream's probe and the burned cores;
// the other cases print "-" for both.
func TestReportShowsWhatRanBeside(t *testing.T) {
	rep := report{o: options{rounds: 3}, baseline: map[string]string{"fwd": "direct", "mesh": "dnsmasq"}}
	res := func(p99 time.Duration) result { return result{sent: 100, qps: 50, p50: p99 / 4, p99: p99} }
	for i, up := range []time.Duration{3, 1, 2} {
		rep.addHalf("fwd", "skiff", 50, res(time.Duration(i+2)*time.Millisecond), res(up*time.Millisecond), 0)
		rep.addHalf("fwd", "direct", 50, res(time.Millisecond), res(time.Millisecond/2), 0)
		rep.addHalf("fwd", "direct, burned", 50, res(time.Millisecond), res(time.Millisecond), 0.55)
	}
	rep.addHalf("mesh", "dnsmasq", 50, res(time.Millisecond), result{}, 0)
	var b strings.Builder
	rep.write(&b)
	out := b.String()
	for _, want := range []string{
		"| fwd | skiff | 50 | 50 | 0 | 0.500 | 2.000 | 0.000 | 0.000 | 3.000 | - |",
		"| fwd | direct, burned | 50 | 50 | 0 | 0.250 | 1.000 | 0.000 | 0.000 | 1.000 | 0.55 cores |",
		"| mesh | dnsmasq | 50 | 50 | 0 | 0.250 | 1.000 | 0.000 | 0.000 | - | - |",
		// Medians of three: skiff's p99s 2, 3, 4 ms, its probes 3, 1, 2 ms.
		"| fwd | skiff | 0.750 | 3.000 | 2.000-4.000 | 3.00x | 2.000 |",
		"| mesh | dnsmasq | 0.250 | 1.000 | 1.000-1.000 | 1.00x | - |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestBurnTakesAShareOfOneCore(t *testing.T) {
	for _, cores := range []float64{0, -0.5, 1.5} {
		if err := burn(cores); err == nil || !strings.Contains(err.Error(), "-burn") {
			t.Errorf("burn(%v) = %v, want an error naming -burn", cores, err)
		}
	}
}
