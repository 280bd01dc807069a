package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// udpReadBuffer is the receive buffer asked for each UDP socket (the
// kernel caps it at net.core.rmem_max): room for a few thousand queries
// while the process is off CPU, instead of the default's ~200.
const udpReadBuffer = 1 << 20

// portRetries bounds attempts to find a port free for UDP and TCP on every
// address when the configuration asks for port 0.
const portRetries = 10

// listen binds UDP and TCP on every configured address; s.mu is held.
// Port 0 is resolved to one port shared by all addresses.
func (s *Server) listen() error {
	var err error
	for range portRetries {
		if err = s.listenAll(); err == nil || !errors.Is(err, syscall.EADDRINUSE) || !s.wantsAnyPort() {
			return err
		}
		s.closeListeners()
		s.udp, s.tcp, s.addrs = nil, nil, nil
	}
	return err
}

func (s *Server) wantsAnyPort() bool {
	for _, a := range s.cfg.Addrs {
		if a.Port() == 0 {
			return true
		}
	}
	return false
}

func (s *Server) listenAll() error {
	var port uint16
	for _, a := range s.cfg.Addrs {
		if a.Port() == 0 && port != 0 {
			a = netip.AddrPortFrom(a.Addr(), port)
		}
		bound, err := s.listenAddr(a)
		if err != nil {
			if a.Addr().Is6() && len(s.cfg.Addrs) > 1 &&
				(errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT)) {
				s.log.Warn("skipping IPv6 listen address: IPv6 unavailable", "addr", a, "err", err)
				continue
			}
			return err
		}
		if a.Port() == 0 {
			port = bound.Port()
		}
		s.addrs = append(s.addrs, bound)
	}
	if len(s.addrs) == 0 {
		return errors.New("dns proxy: no address could be bound")
	}
	return nil
}

// listenAddr binds cfg.UDPReaders UDP sockets and one TCP listener on a,
// all on the same port, and returns the bound address.
func (s *Server) listenAddr(a netip.AddrPort) (netip.AddrPort, error) {
	lc := net.ListenConfig{Control: reusePort}
	network := "udp4"
	if a.Addr().Is6() {
		network = "udp6"
	}
	for i := range s.cfg.UDPReaders {
		pc, err := lc.ListenPacket(context.Background(), network, a.String())
		if err != nil {
			return a, fmt.Errorf("listen udp %s: %w", a, err)
		}
		c := pc.(*net.UDPConn)
		s.udp = append(s.udp, c)
		if err := c.SetReadBuffer(udpReadBuffer); err != nil {
			s.log.Debug("cannot enlarge UDP receive buffer", "addr", a, "err", err)
		}
		if i == 0 {
			a = c.LocalAddr().(*net.UDPAddr).AddrPort()
		}
	}
	tcpNet := "tcp4"
	if a.Addr().Is6() {
		tcpNet = "tcp6"
	}
	l, err := (&net.ListenConfig{}).Listen(context.Background(), tcpNet, a.String())
	if err != nil {
		return a, fmt.Errorf("listen tcp %s: %w", a, err)
	}
	s.tcp = append(s.tcp, l)
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()), nil
}
