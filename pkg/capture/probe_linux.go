package capture

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/skiff-mesh/skiff/pkg/origdst"
)

// probeTarget is where the probe dials: an address the proxy uid's traffic
// to which must be redirected to the inbound capture port.
var probeTarget = netip.MustParseAddr("127.0.0.6")

// Probe proves that capture works in the calling thread's namespace: it
// listens on p's outbound and inbound capture ports on 127.0.0.1, dials
// 127.0.0.6:probePort as the proxy uid, and succeeds when a listener accepts the
// connection within timeout and SO_ORIGINAL_DST reports the probe port.
func Probe(ctx context.Context, p *Policy, probePort uint16, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := make(chan error, 2)
	// The listeners are gone when Probe returns: Close alone releases a
	// listener's port only once its Accept has returned, and the proxy (or
	// a test) listens on the same ports next.
	var accepting sync.WaitGroup
	defer accepting.Wait()
	for _, port := range []uint16{p.ProxyPort, p.InboundCapturePort} {
		ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
		if err != nil {
			return fmt.Errorf("validation: listen on %d: %w", port, err)
		}
		defer ln.Close()
		accepting.Add(1)
		go func() {
			defer accepting.Done()
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			// Reset, not FIN: a closing connection would hold the capture
			// port (FIN_WAIT, TIME_WAIT) that the proxy binds next.
			_ = c.SetLinger(0)
			defer c.Close()
			dst, err := origdst.Of(c)
			if err == nil && dst.Port() != probePort {
				err = fmt.Errorf("original destination %s, want port %d", dst, probePort)
			}
			got <- err
		}()
	}
	var uid, gid uint32 = 1337, 1337
	if len(p.ProxyUIDs) > 0 {
		uid = p.ProxyUIDs[0]
	}
	if len(p.ProxyGIDs) > 0 {
		gid = p.ProxyGIDs[0]
	}
	deadline, _ := ctx.Deadline()
	c, err := origdst.DialAs(netip.AddrPortFrom(probeTarget, probePort), uid, gid, time.Until(deadline))
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
		return fmt.Errorf("%w: no capture listener saw the probe within %s", ErrValidation, timeout)
	}
}
