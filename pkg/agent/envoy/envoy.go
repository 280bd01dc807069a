// Package envoy supervises the proxy process: it starts it with Istio's
// flags, restarts it with backoff when it crashes, forwards signals, and
// drains it gracefully when the agent is told to stop.
package envoy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Proxy describes how to run the proxy.
type Proxy struct {
	Binary    string
	Bootstrap string // path passed with -c
	// Concurrency is Envoy's worker count; 0 leaves Envoy's default.
	Concurrency int
	AdminPort   int
	// DrainTime is --drain-time-s; TerminationDrain is how long the agent
	// waits after draining before it stops the proxy.
	DrainTime        time.Duration
	TerminationDrain time.Duration
	// ExitOnZeroConnections stops the proxy, after MinDrain, as soon as
	// its listeners hold no connection (Istio's
	// EXIT_ON_ZERO_ACTIVE_CONNECTIONS and MINIMUM_DRAIN_DURATION) instead
	// of after TerminationDrain. IgnoreListeners are stats of listeners
	// that do not count (IgnoredListeners); CheckEvery is how often it
	// looks (default 1 s, as Istio).
	ExitOnZeroConnections bool
	MinDrain              time.Duration
	IgnoreListeners       []string
	CheckEvery            time.Duration
	// ExtraArgs are appended to the command line.
	ExtraArgs      []string
	Stdout, Stderr io.Writer
	// MaxBackoff caps the wait between restarts.
	MaxBackoff time.Duration
}

// Args is the proxy's command line (without the binary).
func (p *Proxy) Args() []string {
	drain := int(p.DrainTime / time.Second)
	if drain <= 0 {
		drain = 45
	}
	args := []string{"-c", p.Bootstrap, "--drain-time-s", strconv.Itoa(drain), "--drain-strategy", "immediate",
		"--disable-hot-restart", "--local-address-ip-version", "v4", "--log-format", "%Y-%m-%dT%T.%fZ\t%l\tenvoy %n %g:%#\t%v\tthread=%t"}
	if p.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(p.Concurrency))
	}
	return append(args, p.ExtraArgs...)
}

// ExitError is the proxy's exit when the agent should exit with its code.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("proxy exited with code %d", e.Code) }

// Run runs the proxy until it exits cleanly or ctx ends. A crash restarts it
// after a backoff (100 ms doubling up to MaxBackoff, reset after a minute of
// healthy running). When ctx ends the proxy's inbound listeners are drained
// through its admin API, the agent waits TerminationDrain, then stops it.
// signals carries signals to forward to the running proxy.
func (p *Proxy) Run(ctx context.Context, log *slog.Logger, signals <-chan os.Signal) error {
	backoff := 100 * time.Millisecond
	maxBackoff := p.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 30 * time.Second
	}
	for restarts := 0; ; restarts++ {
		cmd := exec.Command(p.Binary, p.Args()...)
		cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
		cmd.SysProcAttr = sysProcAttr()
		started := time.Now()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start proxy %s: %w", p.Binary, err)
		}
		log.Info("proxy started", "pid", cmd.Process.Pid, "restarts", restarts)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()

		var err error
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case sig := <-signals:
				_ = cmd.Process.Signal(sig)
			case <-ctx.Done():
				return p.stop(cmd, done, log)
			}
		}
		code := exitCode(err)
		if code == 0 {
			log.Info("proxy exited cleanly")
			return nil
		}
		if time.Since(started) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		log.Warn("proxy exited, restarting", "code", code, "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// stop drains the proxy, waits the termination drain duration, then stops it.
func (p *Proxy) stop(cmd *exec.Cmd, done chan error, log *slog.Logger) error {
	if p.AdminPort > 0 {
		if err := Drain(p.AdminPort); err != nil {
			log.Warn("drain request failed", "err", err)
		} else {
			log.Info("draining inbound listeners", "wait", p.TerminationDrain, "until no connections", p.ExitOnZeroConnections)
		}
	}
	if p.ExitOnZeroConnections && p.AdminPort > 0 {
		if exited, err := p.waitForZero(done, log); exited {
			return exitErr(err)
		}
	} else {
		select {
		case err := <-done: // it went away by itself
			return exitErr(err)
		case <-time.After(p.TerminationDrain):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return exitErr(err)
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		return exitErr(<-done)
	}
}

func exitErr(err error) error {
	if c := exitCode(err); c != 0 && c != -1 {
		return &ExitError{Code: c}
	}
	return nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// Drain asks the proxy to drain its inbound listeners gracefully.
func Drain(adminPort int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/drain_listeners?inboundonly&graceful", adminPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}

// ExitCode is the code the agent exits with.
func (e *ExitError) ExitCode() int { return e.Code }
