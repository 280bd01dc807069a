package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// What a forwarded query's latency is made of. Every forwarded query waits
// for the upstream, and on two shared cores the upstream answers more
// slowly while a forwarder spends CPU beside it. Two measurements show how
// much: a light probe that asks the upstream itself during each half-load
// run of the forward case, and the baseline run again with a process beside
// it that burns as much CPU as the proxy spent forwarding that load.

// Probe settings: light enough not to load the upstream (1000 QPS against
// tens of thousands), one socket, a few queries in flight.
const (
	probeRate        = 1000
	probeOutstanding = 10
)

// runBeside runs dnsperf against s at rate for d and, when up is set, a
// probe against up during the middle half of that run. It returns both
// results; the probe's is zero without up.
func (p dnsperf) runBeside(ctx context.Context, s, up *server, file string, d time.Duration, rate int) (result, result, error) {
	if up == nil {
		r, err := p.run(ctx, s, file, d, rate)
		return r, result{}, err
	}
	type probed struct {
		r   result
		err error
	}
	done := make(chan probed, 1)
	go func() {
		select {
		case <-time.After(d / 4):
		case <-ctx.Done():
			done <- probed{err: ctx.Err()}
			return
		}
		probe := dnsperf{clients: 1, threads: 1, outstanding: probeOutstanding}
		r, err := probe.run(ctx, up, file, max(d/2, time.Second), probeRate)
		done <- probed{r, err}
	}()
	r, err := p.run(ctx, s, file, d, rate)
	pr := <-done
	if err != nil {
		return r, pr.r, err
	}
	if pr.err != nil {
		return r, pr.r, fmt.Errorf("probe of %s: %w", up.name, pr.err)
	}
	return r, pr.r, nil
}

// startBurner runs this binary with -burn: a process that keeps cores of
// one CPU busy (at most one) until stop is called.
func startBurner(ctx context.Context, cores float64) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, "-burn", strconv.FormatFloat(cores, 'f', 3, 64))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the CPU burner: %w", err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}, nil
}

// burnPeriod is the burner's cycle: busy for its share, then asleep, in
// slices as short as a forwarder's turns on the CPU.
const burnPeriod = time.Millisecond

// burn keeps cores (0 < cores ≤ 1) of one CPU busy until killed.
func burn(cores float64) error {
	if !(cores > 0 && cores <= 1) {
		return fmt.Errorf("-burn %v: want a share of one core, above 0 and at most 1", cores)
	}
	busy := time.Duration(cores * float64(burnPeriod))
	idle := syscall.NsecToTimespec(int64(burnPeriod - busy))
	for {
		for end := time.Now().Add(busy); time.Now().Before(end); {
		}
		if idle.Nano() > 0 {
			_ = syscall.Nanosleep(&idle, nil)
		}
	}
}
