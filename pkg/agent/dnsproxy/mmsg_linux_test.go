package dnsproxy

import (
	"errors"
	"net"
	"testing"

	"golang.org/x/net/ipv4"
)

// TestMmsgReadBatch: on real loopback sockets of both families, one read
// returns the datagrams of several senders with their addresses, written
// into the addresses the messages already hold; a steady reader allocates
// nothing; a closed socket reads net.ErrClosed.
func TestMmsgReadBatch(t *testing.T) {
	for _, network := range []struct{ net, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		t.Run(network.net, func(t *testing.T) {
			laddr, _ := net.ResolveUDPAddr(network.net, network.addr)
			conn, err := net.ListenUDP(network.net, laddr)
			if err != nil {
				t.Skip(err) // no IPv6 loopback here
			}
			defer conn.Close()
			bc := newBatchConn(conn)
			if _, ok := bc.(*mmsgConn); !ok {
				t.Fatalf("newBatchConn is %T, want *mmsgConn", bc)
			}
			senders := make([]*net.UDPConn, 3)
			for i := range senders {
				if senders[i], err = net.DialUDP(network.net, nil, conn.LocalAddr().(*net.UDPAddr)); err != nil {
					t.Fatal(err)
				}
				defer senders[i].Close()
			}
			ms := make([]ipv4.Message, 8)
			for i := range ms {
				ms[i].Buffers = [][]byte{make([]byte, 64)}
			}
			var first []net.Addr
			for round := range 2 {
				for i, s := range senders {
					if _, err := s.Write([]byte{byte(round), byte(i)}); err != nil {
						t.Fatal(err)
					}
				}
				got := 0
				for got < len(senders) {
					n, err := bc.ReadBatch(ms[got:], 0)
					if err != nil {
						t.Fatal(err)
					}
					got += n
				}
				for k := range got {
					m := ms[k]
					i := int(m.Buffers[0][1])
					if m.N != 2 || m.Buffers[0][0] != byte(round) {
						t.Fatalf("round %d: datagram %d: %x", round, k, m.Buffers[0][:m.N])
					}
					if want := senders[i].LocalAddr().String(); m.Addr.String() != want {
						t.Errorf("round %d: datagram from %s read as from %s", round, want, m.Addr)
					}
				}
				if round == 0 {
					for k := range got {
						first = append(first, ms[k].Addr)
					}
				} else {
					for k := range got {
						if ms[k].Addr != first[k] {
							t.Errorf("slot %d got a new address object", k)
						}
					}
				}
			}

			// Steady state: one datagram per read, no allocation.
			const reads = 50
			for range reads + 1 { // AllocsPerRun runs once more first
				_, _ = senders[0].Write([]byte{9, 0})
			}
			allocs := testing.AllocsPerRun(reads, func() {
				if _, err := bc.ReadBatch(ms[:1], 0); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > 0 && !raceEnabled {
				t.Errorf("%v allocations per read", allocs)
			}

			conn.Close()
			if _, err := bc.ReadBatch(ms, 0); !errors.Is(err, net.ErrClosed) {
				t.Errorf("read on a closed socket: %v, want net.ErrClosed", err)
			}
		})
	}
}
