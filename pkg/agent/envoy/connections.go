package envoy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ActiveConnections is the sum of Envoy's downstream_cx_active over its
// listeners, from the admin API at adminPort, as Istio's agent counts it:
// listener stats only, not the per-worker copies, not Envoy's internal
// listeners, and not the listeners named in ignore (the agent's own:
// readiness, Prometheus, admin). It is -1 when Envoy reports no such
// stat (no connection yet, or stats off).
func ActiveConnections(ctx context.Context, adminPort int, ignore []string) (int, error) {
	url := fmt.Sprintf("http://127.0.0.1:%d/stats?usedonly&filter=downstream_cx_active$", adminPort)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("proxy's listener stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return countActive(resp.Body, ignore)
}

// countActive sums the "name: value" lines of Envoy's stats text.
func countActive(r io.Reader, ignore []string) (int, error) {
	n, seen := 0, false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		seen = true
		if !strings.HasPrefix(name, "listener.") || strings.Contains(name, "worker_") ||
			strings.HasPrefix(name, "listener.envoy_internal_") || slices.Contains(ignore, name) {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32)
		if err != nil {
			continue
		}
		n += int(v)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !seen {
		return -1, nil
	}
	return n, nil
}

// IgnoredListeners are the stat names of the listeners Istio's bootstrap
// opens for the agent (readiness on statusPort, Prometheus on statsPort,
// and the admin API): their connections do not hold a pod up.
func IgnoredListeners(statusPort, statsPort int) []string {
	return []string{
		fmt.Sprintf("listener.0.0.0.0_%d.downstream_cx_active", statusPort),
		fmt.Sprintf("listener.0.0.0.0_%d.downstream_cx_active", statsPort),
		"listener.admin.downstream_cx_active",
		"listener.admin.main_thread.downstream_cx_active",
	}
}

// waitForZero waits, once the proxy drains, MinDrain and then until its
// active connections are none (or it reports none, or five checks in a row
// fail), checking every CheckEvery; it returns early with the proxy's exit
// when the proxy ends by itself (exited, with its exit).
func (p *Proxy) waitForZero(done chan error, log *slog.Logger) (exited bool, err error) {
	select {
	case err := <-done:
		return true, err
	case <-time.After(p.MinDrain):
	}
	every := p.CheckEvery
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for failures := 0; ; {
		select {
		case err := <-done:
			return true, err
		case <-t.C:
		}
		n, err := ActiveConnections(context.Background(), p.AdminPort, p.IgnoreListeners)
		switch {
		case err != nil:
			if failures++; failures >= 5 {
				log.Warn("active connections unknown; stopping the proxy", "err", err)
				return false, nil
			}
		case n < 0:
			log.Info("the proxy reports no active connections stat; stopping it")
			return false, nil
		case n == 0:
			log.Info("no active connections left; stopping the proxy")
			return false, nil
		default:
			failures = 0
			log.Debug("waiting for active connections to end", "active", n)
		}
	}
}
