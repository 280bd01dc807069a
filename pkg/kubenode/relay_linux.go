package kubenode

import (
	"context"
	"io"
	"net"
	"sync"

	"github.com/skiff-mesh/skiff/pkg/netns"
)

// relay listens on host loopback and carries each connection to an address
// inside the node's network namespace, so tools outside the node (tests,
// helm, istioctl) reach its API server.
type relay struct {
	l      net.Listener
	netns  string
	target string
	wg     sync.WaitGroup
}

func newRelay(nsPath, target string) (*relay, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{l: l, netns: nsPath, target: target}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the relay's host:port on loopback.
func (r *relay) Addr() string { return r.l.Addr().String() }

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		go r.carry(c)
	}
}

func (r *relay) carry(c net.Conn) {
	defer c.Close()
	up, err := dialIn(context.Background(), r.netns, "tcp", r.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); close(done) }()
	_, _ = io.Copy(c, up)
	_ = c.(*net.TCPConn).CloseWrite()
	<-done
}

// dialIn connects from inside a network namespace; the connection keeps
// working after the thread leaves it.
func dialIn(ctx context.Context, nsPath, network, addr string) (c net.Conn, err error) {
	err = netns.Do(nsPath, func() error {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Close stops accepting; open connections end with their peers.
func (r *relay) Close() {
	_ = r.l.Close()
	r.wg.Wait()
}
