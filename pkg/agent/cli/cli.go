// Package cli is the pilot-agent command line: "proxy sidecar|router",
// "request", "wait", "version" and "istio-iptables", as Istio's agent has them.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/agent"
	"github.com/skiff-mesh/skiff/pkg/agent/config"
)

// Version is the agent's version, set at build time with -ldflags -X.
var Version = "skiff-dev"

const usage = `usage: pilot-agent COMMAND
  proxy [sidecar|router]      run the agent (and the proxy)
  request METHOD PATH [BODY]  send a request to the proxy's admin API
  wait                        wait until the agent is ready
  version                     print the version
  istio-iptables [FLAGS]      install the traffic capture rules (Linux)
`

// Main runs pilot-agent with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "proxy":
		return proxy(ctx, args[1:], environ, stdout, stderr, signals)
	case "request":
		return request(args[1:], stdout, stderr)
	case "wait":
		return wait(args[1:], stderr)
	case "version":
		fmt.Fprintln(stdout, Version)
		return 0
	case "istio-iptables":
		return istioIptables(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "pilot-agent: unknown command %q\n%s", args[0], usage)
	return 2
}

func proxy(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	level := fs.String("log_output_level", "info", "log level (debug, info, warn, error); Istio's scope:level lists take the last level")
	fs.String("proxyLogLevel", "warning", "the proxy's log level (accepted for compatibility)")
	fs.String("proxyComponentLogLevel", "", "accepted for compatibility")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	typ := "sidecar"
	if fs.NArg() > 0 {
		typ = fs.Arg(0)
	}
	lvl := *level
	if i := strings.LastIndex(lvl, ":"); i >= 0 {
		lvl = lvl[i+1:]
	}
	var sl slog.Level
	if err := sl.UnmarshalText([]byte(strings.ReplaceAll(lvl, "warning", "warn"))); err != nil {
		fmt.Fprintf(stderr, "pilot-agent: --log_output_level %q: %v\n", *level, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: sl})).With("component", "pilot-agent")
	cfg, err := config.Load(environ, typ)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent: %v\n", err)
		return 2
	}
	err = agent.Run(ctx, cfg, agent.Options{Stdout: stdout, Stderr: stderr, Signals: signals}, log)
	var exit interface{ ExitCode() int }
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		log.Error("agent failed", "err", err)
		return 1
	}
	return 0
}

func request(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("request", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("debug-port", 15000, "the proxy's admin port")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 2 {
		fmt.Fprintln(stderr, "usage: pilot-agent request METHOD PATH [BODY]")
		return 2
	}
	path := strings.TrimPrefix(fs.Arg(1), "/")
	var body io.Reader
	if fs.NArg() > 2 {
		body = strings.NewReader(fs.Arg(2))
	}
	req, err := http.NewRequest(strings.ToUpper(fs.Arg(0)), fmt.Sprintf("http://127.0.0.1:%d/%s", *port, path), body)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent: %v\n", err)
		return 2
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(stdout, resp.Body)
	if resp.StatusCode >= 400 {
		fmt.Fprintf(stderr, "pilot-agent: %s\n", resp.Status)
		return 1
	}
	return 0
}

func wait(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("wait", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Int("timeoutSeconds", 60, "how long to wait")
	period := fs.Int("periodMillis", 500, "time between attempts")
	url := fs.String("url", "http://localhost:15021/healthz/ready", "the readiness URL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Duration(*timeout) * time.Second)
	for {
		resp, err := client.Get(*url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return 0
			}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "pilot-agent: not ready after %ds (%s)\n", *timeout, *url)
			return 1
		}
		time.Sleep(time.Duration(*period) * time.Millisecond)
	}
}
