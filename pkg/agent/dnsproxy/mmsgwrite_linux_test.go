package dnsproxy

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// TestMmsgWriteBatch: on real loopback sockets (IPv4, IPv6, and "udp" on
// 0.0.0.0, which Go binds as a dual-stack IPv6 socket), one write sends
// datagrams to several receivers, each from the writer's address; a
// connected socket sends without addresses; an empty datagram and one of
// two buffers (x/net's path) arrive whole; a steady writer allocates
// nothing; a closed socket writes net.ErrClosed.
func TestMmsgWriteBatch(t *testing.T) {
	for _, tc := range []struct{ name, net, addr, peerNet, peer string }{
		{"udp4", "udp4", "127.0.0.1:0", "udp4", "127.0.0.1:0"},
		{"udp6", "udp6", "[::1]:0", "udp6", "[::1]:0"},
		{"dual-stack", "udp", "0.0.0.0:0", "udp4", "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.ListenUDP(tc.net, mustUDPAddr(t, tc.addr))
			if err != nil {
				t.Skip(err) // no IPv6 loopback here
			}
			defer conn.Close()
			mc, ok := newBatchConn(conn).(*mmsgConn)
			if !ok || !mc.w.ok {
				t.Fatalf("newBatchConn: %T, family known %v; want *mmsgConn that knows", mc, ok && mc.w.ok)
			}
			peers := make([]*net.UDPConn, 3)
			for i := range peers {
				if peers[i], err = net.ListenUDP(tc.peerNet, mustUDPAddr(t, tc.peer)); err != nil {
					t.Fatal(err)
				}
				defer peers[i].Close()
			}
			ms := make([]ipv4.Message, len(peers)+1)
			for i, p := range peers {
				ms[i] = ipv4.Message{Buffers: [][]byte{{byte(i), 1, 2}}, Addr: p.LocalAddr()}
			}
			ms[3] = ipv4.Message{Buffers: [][]byte{{}}, Addr: peers[0].LocalAddr()}
			if n, err := mc.WriteBatch(ms, 0); n != len(ms) || err != nil {
				t.Fatalf("WriteBatch: %d, %v; want %d sent", n, err, len(ms))
			}
			for i, p := range peers {
				expectDatagram(t, p, []byte{byte(i), 1, 2}, conn.LocalAddr().(*net.UDPAddr).Port)
			}
			expectDatagram(t, peers[0], []byte{}, conn.LocalAddr().(*net.UDPAddr).Port)

			// Two buffers: x/net's path, one datagram.
			two := []ipv4.Message{{Buffers: [][]byte{{7}, {8, 9}}, Addr: peers[1].LocalAddr()}}
			if n, err := mc.WriteBatch(two, 0); n != 1 || err != nil {
				t.Fatalf("WriteBatch of two buffers: %d, %v", n, err)
			}
			expectDatagram(t, peers[1], []byte{7, 8, 9}, conn.LocalAddr().(*net.UDPAddr).Port)

			// Steady state: no allocation per write.
			one := ms[:1]
			allocs := testing.AllocsPerRun(50, func() {
				if _, err := mc.WriteBatch(one, 0); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > 0 && !raceEnabled {
				t.Errorf("%v allocations per write", allocs)
			}

			conn.Close()
			if _, err := mc.WriteBatch(one, 0); !errors.Is(err, net.ErrClosed) {
				t.Errorf("write on a closed socket: %v, want net.ErrClosed", err)
			}
		})
	}
}

// TestMmsgWriteBatchConnected: a connected socket's messages carry no
// address and reach its peer; one call sends at most udpBatch, and
// writeAll sends the rest.
func TestMmsgWriteBatchConnected(t *testing.T) {
	peer, err := net.ListenUDP("udp4", mustUDPAddr(t, "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conn, err := net.DialUDP("udp4", nil, peer.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bc := newBatchConn(conn)
	ms := make([]ipv4.Message, udpBatch+3)
	for i := range ms {
		ms[i].Buffers = [][]byte{{byte(i)}}
	}
	if n, err := bc.WriteBatch(ms, 0); n != udpBatch || err != nil {
		t.Fatalf("WriteBatch of %d: %d, %v; want %d sent", len(ms), n, err, udpBatch)
	}
	if err := writeAll(bc, ms[udpBatch:]); err != nil {
		t.Fatal(err)
	}
	for i := range ms {
		expectDatagram(t, peer, []byte{byte(i)}, conn.LocalAddr().(*net.UDPAddr).Port)
	}
}

func mustUDPAddr(t *testing.T, s string) *net.UDPAddr {
	t.Helper()
	a, err := net.ResolveUDPAddr("udp", s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// expectDatagram reads one datagram from c and checks its payload and the
// sender's port.
func expectDatagram(t *testing.T, c *net.UDPConn, want []byte, fromPort int) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("read on %s: %v", c.LocalAddr(), err)
	}
	if !bytes.Equal(buf[:n], want) || from.Port != fromPort {
		t.Errorf("on %s: %x from port %d, want %x from %d", c.LocalAddr(), buf[:n], from.Port, want, fromPort)
	}
}
