package ha_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// forwarder is a loopback TCP proxy standing in for istiod's Service: each
// connection goes to the first upstream that accepts, in order, so a
// client whose replica dies reconnects to a survivor.
type forwarder struct {
	lis       net.Listener
	upstreams []string

	mu    sync.Mutex
	last  string // upstream of the latest connection
	conns map[net.Conn]bool
}

func startForwarder(t *testing.T, upstreams ...string) *forwarder {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{lis: lis, upstreams: upstreams, conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		<-done
		f.mu.Lock()
		defer f.mu.Unlock()
		for c := range f.conns {
			c.Close()
		}
	})
	return f
}

func (f *forwarder) addr() string { return f.lis.Addr().String() }

// upstream returns the replica that took the latest connection.
func (f *forwarder) upstream() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *forwarder) track(c net.Conn, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.conns[c] = true
	} else {
		delete(f.conns, c)
	}
}

func (f *forwarder) serve(down net.Conn) {
	f.track(down, true)
	defer f.track(down, false)
	defer down.Close()
	var up net.Conn
	for _, a := range f.upstreams {
		c, err := net.Dial("tcp", a)
		if err == nil {
			up = c
			f.mu.Lock()
			f.last = a
			f.mu.Unlock()
			break
		}
	}
	if up == nil {
		return
	}
	f.track(up, true)
	defer f.track(up, false)
	defer up.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, down)
		up.Close()
	})
	io.Copy(down, up)
	down.Close()
	wg.Wait()
}
