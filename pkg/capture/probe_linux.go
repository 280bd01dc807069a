package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/skiff-mesh/skiff/pkg/origdst"
)

// ErrValidation means the probe found that traffic is not captured.
// istio-iptables exits with code 126 on it, as Istio's does.
var ErrValidation = errors.New("traffic capture validation failed")

// probeTarget is where the probe dials: an address the proxy uid's traffic
// to which must be redirected to the inbound capture port.
var probeTarget = netip.MustParseAddr("127.0.0.6")

// Validate proves that capture works in the calling thread's namespace:
// it listens on the outbound and inbound capture ports on 127.0.0.1, dials
// 127.0.0.6:ProbePort as the proxy uid, and succeeds when a listener accepts
// the connection and SO_ORIGINAL_DST reports the probe port.
func Validate(ctx context.Context, cfg *Config) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.ProbeTimeout)
	defer cancel()
	got := make(chan error, 2)
	for _, port := range []uint16{cfg.ProxyPort, cfg.InboundCapturePort} {
		ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
		if err != nil {
			return fmt.Errorf("validation: listen on %d: %w", port, err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			defer c.Close()
			dst, err := origdst.Of(c)
			if err == nil && dst.Port() != cfg.ProbePort {
				err = fmt.Errorf("original destination %s, want port %d", dst, cfg.ProbePort)
			}
			got <- err
		}()
	}
	var uid, gid uint32 = 1337, 1337
	if len(cfg.ProxyUIDs) > 0 {
		uid = cfg.ProxyUIDs[0]
	}
	if len(cfg.ProxyGIDs) > 0 {
		gid = cfg.ProxyGIDs[0]
	}
	deadline, _ := ctx.Deadline()
	c, err := origdst.DialAs(netip.AddrPortFrom(probeTarget, cfg.ProbePort), uid, gid, time.Until(deadline))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrValidation, err)
	}
	defer c.Close()
	select {
	case err := <-got:
		if err != nil {
			return fmt.Errorf("%w: %v", ErrValidation, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: no capture listener saw the probe within %s", ErrValidation, cfg.ProbeTimeout)
	}
}
