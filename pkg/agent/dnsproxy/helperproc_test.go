package dnsproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// helperEnv makes the test binary run a proxy instead of tests, so a test
// can start one as another user (the proxy uid) or in another namespace.
// The value is "listen-addr|resolv.conf path|name table JSON path".
const helperEnv = "DNSPROXY_TEST_HELPER"

// runHelperProxy serves until SIGTERM and returns the exit code. It prints
// "ready" on stdout once listening.
func runHelperProxy() int {
	var listen, resolv, tablePath string
	if _, err := fmt.Sscanf(os.Getenv(helperEnv), "%s %s %s", &listen, &resolv, &tablePath); err != nil {
		fmt.Fprintln(os.Stderr, "bad", helperEnv, err)
		return 2
	}
	cfg, err := ConfigFromResolvConf(resolv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Namespace = "default"
	cfg.Addrs = []netip.AddrPort{netip.MustParseAddrPort(listen)}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(cfg, log, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := os.ReadFile(tablePath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nt := &nds.NameTable{}
	if err := json.Unmarshal(b, nt); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.UpdateTable(nt)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done()
	_ = s.Close()
	return 0
}
