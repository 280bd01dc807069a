package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // for -serve-pprof
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-mesh/skiff/pkg/agent/dnsproxy"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// server is a DNS server process under test (or the upstream).
type server struct {
	name string
	ip   string
	port int
	cmd  *exec.Cmd
}

func (s *server) addr() string     { return net.JoinHostPort(s.ip, strconv.Itoa(s.port)) }
func (s *server) hashAddr() string { return s.ip + "#" + strconv.Itoa(s.port) }

// stop kills the process and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// cpu returns the user+system CPU time the process has used so far.
func (s *server) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu time of %s: %w", s.name, err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// startDnsmasq runs dnsmasq on ip and a free port with extra arguments.
func startDnsmasq(ctx context.Context, name, ip string, extra ...string) (*server, error) {
	port, err := freePort(ip)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--keep-in-foreground", "--port=" + strconv.Itoa(port), "--listen-address=" + ip,
		"--bind-interfaces", "--no-resolv", "--no-hosts", "--conf-file=/dev/null", "--pid-file=", "--user=root",
		"--log-facility=/dev/null"}, extra...)
	s := &server{name: name, ip: ip, port: port, cmd: exec.CommandContext(ctx, "dnsmasq", args...)}
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return s, waitAnswering(s)
}

// startSkiff runs this binary with -serve as a separate process, so its CPU
// time is measured like dnsmasq's.
func startSkiff(ctx context.Context, ip, upstream, table string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	port, err := freePort(ip)
	if err != nil {
		return nil, err
	}
	s := &server{name: "skiff", ip: ip, port: port}
	s.cmd = exec.CommandContext(ctx, self, "-serve", s.addr(), "-serve-upstream", upstream, "-serve-table", table)
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start skiff: %w", err)
	}
	return s, waitAnswering(s)
}

// waitAnswering waits until s answers a query.
func waitAnswering(s *server) error {
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("probe.invalid.", dns.TypeA)
	for range 50 {
		if _, _, err := c.Exchange(m, s.addr()); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return fmt.Errorf("%s on %s did not answer", s.name, s.addr())
}

// freePort returns a port free for UDP on ip.
func freePort(ip string) (int, error) {
	pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port, nil
}

// serveOptions configure -serve.
type serveOptions struct {
	addr, upstream, table string
	readers               int
	pprof                 bool
}

// serve runs only the proxy until SIGINT or SIGTERM, as a pod in namespace
// ns-0 would.
func serve(o serveOptions, names int) error {
	ap, err := netip.ParseAddrPort(o.addr)
	if err != nil {
		return fmt.Errorf("-serve %q: %w", o.addr, err)
	}
	cfg := dnsproxy.Config{
		Addrs:         []netip.AddrPort{ap},
		SearchDomains: []string{"ns-0.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Namespace:     "ns-0",
		UDPReaders:    o.readers,
	}
	if o.upstream != "" {
		up, err := netip.ParseAddrPort(o.upstream)
		if err != nil {
			return fmt.Errorf("-serve-upstream %q: %w", o.upstream, err)
		}
		cfg.Upstreams = []netip.AddrPort{up}
	}
	nt := meshTable(names)
	if o.table != "" {
		b, err := os.ReadFile(o.table)
		if err != nil {
			return fmt.Errorf("read table: %w", err)
		}
		nt = &nds.NameTable{}
		if err := json.Unmarshal(b, nt); err != nil {
			return fmt.Errorf("parse table %s: %w", o.table, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := dnsproxy.New(cfg, log, nil)
	if err != nil {
		return fmt.Errorf("new proxy: %w", err)
	}
	s.UpdateTable(nt)
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("start proxy: %w", err)
	}
	if o.pprof {
		go func() { _ = http.ListenAndServe("localhost:6060", nil) }()
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "ready")
	_ = w.Flush()
	<-ctx.Done()
	return s.Close()
}
