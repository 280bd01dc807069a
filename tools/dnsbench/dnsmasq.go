package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// dnsmasqProc is a dnsmasq started for the benchmark.
type dnsmasqProc struct {
	ip   string
	port int
	cmd  *exec.Cmd
}

// startDnsmasq runs dnsmasq on ip and a free port with extra arguments and
// waits until it answers.
func startDnsmasq(ctx context.Context, ip string, extra ...string) (*dnsmasqProc, error) {
	port, err := freePort(ip)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--keep-in-foreground", "--port=" + strconv.Itoa(port), "--listen-address=" + ip,
		"--bind-interfaces", "--no-resolv", "--no-hosts", "--conf-file=/dev/null", "--pid-file=", "--user=root",
		"--log-facility=/dev/null"}, extra...)
	cmd := exec.CommandContext(ctx, "dnsmasq", args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start dnsmasq: %w", err)
	}
	d := &dnsmasqProc{ip: ip, port: port, cmd: cmd}
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("probe.invalid.", dns.TypeA)
	for range 50 {
		if _, _, err := c.Exchange(m, net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
			return d, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.stop()
	return nil, fmt.Errorf("dnsmasq on %s:%d did not answer", ip, port)
}

func (d *dnsmasqProc) stop() {
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
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
