// Command dnsbench measures the Skiff DNS proxy against dnsmasq with Debian's
// dnsperf on this machine: maximum QPS, and latency percentiles at half of
// each server's maximum, for mesh names and for forwarded names with a warm
// cache. Both servers get the same names, upstream and load, in the same
// run. It needs dnsmasq and dnsperf on PATH; it only uses loopback.
//
//	go run ./tools/dnsbench -duration 10s
//
// It prints a Markdown report on stdout (progress goes to stderr).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/skiff-mesh/skiff/pkg/agent/dnsproxy"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each dnsperf run")
	flag.IntVar(&o.names, "names", 1000, "number of mesh names and of forwarded names")
	flag.IntVar(&o.clients, "clients", 8, "dnsperf -c: client sockets")
	flag.IntVar(&o.threads, "threads", 1, "dnsperf -T: threads")
	flag.IntVar(&o.outstanding, "outstanding", 200, "dnsperf -q: queries in flight")
	flag.IntVar(&o.rate, "latency-rate", 0, "offered QPS of the latency runs (default: half of each server's maximum)")
	flag.StringVar(&o.serve, "serve", "", "only run the proxy with the benchmark's mesh names on this ip:port (for profiling), until interrupted")
	flag.Parse()
	if o.serve != "" {
		if err := serve(o); err != nil {
			fmt.Fprintln(os.Stderr, "dnsbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dnsbench:", err)
		os.Exit(1)
	}
}

// options are the benchmark's knobs.
type options struct {
	duration    time.Duration
	names       int
	clients     int
	threads     int
	outstanding int
	rate        int
	serve       string
}

// target is one server under test.
type target struct {
	name string
	addr string // ip
	port int
}

func run(ctx context.Context, o options, out io.Writer) error {
	for _, tool := range []string{"dnsmasq", "dnsperf"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: apt-get install -y %s", tool, map[string]string{"dnsmasq": "dnsmasq-base", "dnsperf": "dnsperf"}[tool])
		}
	}
	dir, err := os.MkdirTemp("", "dnsbench")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	w, err := writeWorkload(dir, o.names)
	if err != nil {
		return err
	}

	upstream, err := startDnsmasq(ctx, "127.0.53.1", "--addn-hosts="+w.upstreamHosts, "--local-ttl=3600", "--cache-size=0")
	if err != nil {
		return fmt.Errorf("upstream dnsmasq: %w", err)
	}
	defer upstream.stop()
	// The comparison: dnsmasq serving the mesh names from a hosts file and
	// forwarding the rest to the same upstream through its cache.
	rival, err := startDnsmasq(ctx, "127.0.53.2", "--addn-hosts="+w.meshHosts, "--local-ttl=30",
		"--cache-size=10000", fmt.Sprintf("--server=/bench.test/%s#%d", upstream.ip, upstream.port))
	if err != nil {
		return fmt.Errorf("comparison dnsmasq: %w", err)
	}
	defer rival.stop()
	proxy, port, err := startProxy(ctx, "127.0.53.3", netip.AddrPortFrom(netip.MustParseAddr(upstream.ip), uint16(upstream.port)), w.table)
	if err != nil {
		return err
	}
	defer proxy.Close()

	targets := []target{{"skiff", "127.0.53.3", port}, {"dnsmasq", rival.ip, rival.port}}
	sets := []struct{ name, file string }{{"mesh names", w.meshQueries}, {"forwarded, warm cache", w.fwdQueries}}
	p := dnsperf{clients: o.clients, threads: o.threads, outstanding: o.outstanding}
	for _, t := range targets {
		status("warming %s", t.name)
		for _, s := range sets {
			if _, err := p.run(ctx, t, s.file, 0, 0, true); err != nil {
				return err
			}
		}
	}
	load := loadAverage()
	rep := report{duration: o.duration, names: o.names, load: load, p: p}
	for _, s := range sets {
		for _, t := range targets {
			status("max rate: %s, %s", t.name, s.name)
			r, err := p.run(ctx, t, s.file, o.duration, 0, false)
			if err != nil {
				return err
			}
			rep.max = append(rep.max, row{set: s.name, server: t.name, res: r})
		}
	}
	for _, s := range sets {
		for _, t := range targets {
			half := int(rep.find(s.name, t.name).qps / 2)
			if o.rate > 0 {
				half = o.rate
			}
			status("latency at %d qps: %s, %s", half, t.name, s.name)
			r, err := p.run(ctx, t, s.file, o.duration, half, false)
			if err != nil {
				return err
			}
			rep.half = append(rep.half, row{set: s.name, server: t.name, res: r, rate: half})
		}
	}
	rep.loadAfter = loadAverage()
	rep.write(out)
	return nil
}

// serve runs only the proxy, answering the benchmark's mesh names (and
// SERVFAIL for the rest), with pprof on localhost:6060.
func serve(o options) error {
	dir, err := os.MkdirTemp("", "dnsbench")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	w, err := writeWorkload(dir, o.names)
	if err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(o.serve)
	if err != nil {
		return fmt.Errorf("-serve %q: %w", o.serve, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := dnsproxy.New(dnsproxy.Config{Addrs: []netip.AddrPort{ap}, Namespace: "ns-0"}, slog.Default(), nil)
	if err != nil {
		return fmt.Errorf("new proxy: %w", err)
	}
	s.UpdateTable(w.table)
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("start proxy: %w", err)
	}
	go func() { _ = http.ListenAndServe("localhost:6060", nil) }()
	status("serving %s; queries in %s", ap, w.meshQueries)
	<-ctx.Done()
	return s.Close()
}

// startProxy runs the Skiff proxy in this process on ip, port 0, with the
// pod settings of namespace ns-0.
func startProxy(ctx context.Context, ip string, upstream netip.AddrPort, nt *nds.NameTable) (*dnsproxy.Server, int, error) {
	cfg := dnsproxy.Config{
		Addrs:         []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr(ip), 0)},
		Upstreams:     []netip.AddrPort{upstream},
		SearchDomains: []string{"ns-0.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Namespace:     "ns-0",
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := dnsproxy.New(cfg, log, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("new proxy: %w", err)
	}
	s.UpdateTable(nt)
	if err := s.Start(ctx); err != nil {
		return nil, 0, fmt.Errorf("start proxy: %w", err)
	}
	return s, int(s.Addrs()[0].Port()), nil
}

// status prints progress on stderr.
func status(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dnsbench: "+format+"\n", args...)
}

// loadAverage returns the 1-minute load average, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0] + fmt.Sprintf(" (%d CPUs)", runtime.NumCPU())
}
