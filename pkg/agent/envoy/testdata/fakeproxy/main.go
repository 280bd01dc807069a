// Command fakeproxy stands in for Envoy in the supervisor's tests: it takes
// Envoy's flags, serves an admin API, and records what happens to it in the
// file named by FAKEPROXY_LOG. FAKEPROXY_CRASH=N makes its first N runs exit 1.
// FAKEPROXY_ADS=1 also opens an ADS stream as Envoy's, from the bootstrap.
// FAKEPROXY_STATS names a file served as its /stats.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func record(format string, args ...any) {
	f, err := os.OpenFile(os.Getenv("FAKEPROXY_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

func main() {
	conf := flag.String("c", "", "bootstrap")
	drain := flag.Int("drain-time-s", 0, "")
	flag.String("drain-strategy", "", "")
	flag.Bool("disable-hot-restart", false, "")
	flag.String("local-address-ip-version", "", "")
	flag.String("log-format", "", "")
	flag.Int("concurrency", 0, "")
	// The rest of the flags Istio's own agent passes Envoy.
	flag.Int("file-flush-interval-msec", 0, "")
	flag.Int("file-flush-min-size-kb", 0, "")
	flag.Bool("allow-unknown-static-fields", false, "")
	flag.Bool("skip-deprecated-logs", false, "")
	flag.Bool("enable-core-dump", false, "")
	flag.String("l", "", "")
	flag.String("component-log-level", "", "")
	flag.String("config-yaml", "", "")
	flag.Parse()
	runs := 0
	if b, err := os.ReadFile(os.Getenv("FAKEPROXY_LOG")); err == nil {
		runs = strings.Count(string(b), "start ")
	}
	record("start c=%s drain=%d", *conf, *drain)
	if n, _ := strconv.Atoi(os.Getenv("FAKEPROXY_CRASH")); runs < n {
		record("crash")
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("FAKEPROXY_ADMIN_PORT"))
	if err != nil {
		record("admin listen: %v", err)
		os.Exit(3)
	}
	http.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "LIVE") })
	http.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "envoy_server_live 1") })
	http.HandleFunc("/drain_listeners", func(w http.ResponseWriter, r *http.Request) {
		record("drain %s %s", r.Method, r.URL.RawQuery)
	})
	// Envoy's stats text; the lines are FAKEPROXY_STATS's file, read anew
	// on each request, so a test changes what the proxy reports.
	http.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		record("stats %s", r.URL.RawQuery)
		b, _ := os.ReadFile(os.Getenv("FAKEPROXY_STATS"))
		w.Write(b)
	})
	go func() { _ = http.Serve(ln, nil) }()
	if os.Getenv("FAKEPROXY_ADS") != "" {
		go func() { record("ads ended: %v", ads(*conf)) }()
	}
	// Handle signals before saying ready: a test signals as soon as it reads "ready".
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1)
	record("ready")
	for s := range sigs {
		record("signal %s", s)
		if s == syscall.SIGTERM {
			os.Exit(0)
		}
		if s == syscall.SIGUSR1 {
			os.Exit(7)
		}
	}
}
