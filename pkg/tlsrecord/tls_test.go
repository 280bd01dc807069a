package tlsrecord_test

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
	"github.com/skiff-mesh/skiff/pkg/tlsrecord"
)

const spiffeID = "spiffe://cluster.local/ns/default/sa/tlsrecord"

// TestTLSOverConn: a TLS server reading through a Conn gets every byte a
// client sent in bursts of records of many sizes, and answers.
func TestTLSOverConn(t *testing.T) {
	scfg, ccfg := pkitest.MutualTLS(t, spiffeID)
	s, c := tcpPair(t)
	srv, cli := tls.Server(tlsrecord.NewConn(s), scfg), tls.Client(c, ccfg)
	sizes := []int{1, 100, 16 << 10, 70 << 10, 3, 200 << 10}
	total := 0
	for _, n := range sizes {
		total += n
	}
	want := make([]byte, total)
	rand.Read(want)
	wrote := make(chan error, 1)
	go func() {
		rest := want
		for _, n := range sizes {
			if _, err := cli.Write(rest[:n]); err != nil {
				wrote <- err
				return
			}
			rest = rest[n:]
		}
		wrote <- nil
	}()
	got := make([]byte, total)
	if _, err := io.ReadFull(srv, got); err != nil {
		t.Fatalf("server read: %v (client: %v)", err, <-wrote)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("client write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("server read other bytes than the client wrote")
	}
	if _, err := srv.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	ans := make([]byte, 2)
	if _, err := io.ReadFull(cli, ans); err != nil || string(ans) != "ok" {
		t.Fatalf("client read %q, %v", ans, err)
	}
}

// BenchmarkHeldPerConn measures the heap TLS servers keep per connection
// once each client has sent a 64 KiB burst and gone quiet: crypto/tls on
// the socket, and on a Conn.
func BenchmarkHeldPerConn(b *testing.B) {
	for _, bc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{
		{"tls", func(c net.Conn) net.Conn { return c }},
		{"tlsrecord", func(c net.Conn) net.Conn { return tlsrecord.NewConn(c) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const conns, burst = 100, 64 << 10
			scfg, ccfg := pkitest.MutualTLS(b, spiffeID)
			msg := make([]byte, burst)
			var held float64
			for b.Loop() {
				var ms0, ms1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms0)
				servers := make([]*tls.Conn, 0, conns)
				for range conns {
					s, c := tcpPair(b)
					srv, cli := tls.Server(bc.wrap(s), scfg), tls.Client(c, ccfg)
					done := make(chan error, 1)
					go func() { _, err := cli.Write(msg); done <- err }()
					if _, err := io.ReadFull(srv, make([]byte, burst)); err != nil {
						b.Fatal(err)
					}
					if err := <-done; err != nil {
						b.Fatal(err)
					}
					servers = append(servers, srv)
				}
				runtime.GC()
				runtime.ReadMemStats(&ms1)
				held += float64(ms1.HeapAlloc-ms0.HeapAlloc) / conns
				runtime.KeepAlive(servers)
				for _, s := range servers {
					s.Close()
				}
			}
			b.ReportMetric(held/float64(b.N), "B-held/conn")
		})
	}
}
