package grpcserver_test

import (
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
)

// BenchmarkIdleConn reports what the server holds for an idle TLS
// connection with one open stream, as a sidecar's at rest: goroutine
// stacks and heap per connection, after collections. The clients are
// driven from the benchmark's goroutine (no goroutines of their own), so
// the stacks counted are the server's.
func BenchmarkIdleConn(b *testing.B) {
	const conns = 200
	serverTLS, clientTLS := pkitest.MutualTLS(b, spiffeID)
	clientTLS.NextProtos = []string{"h2"}
	s := grpcserver.New(grpcserver.Options{TLS: serverTLS})
	s.RegisterService(&echoDesc, &echoService{})
	addr := serve(b, s)
	var stack, heap float64
	for b.Loop() {
		var ms0, ms1 runtime.MemStats
		settle()
		runtime.ReadMemStats(&ms0)
		var clients []*tls.Conn
		for range conns {
			clients = append(clients, openChat(b, addr, clientTLS))
		}
		settle()
		runtime.ReadMemStats(&ms1)
		stack += float64(ms1.StackInuse-ms0.StackInuse) / conns
		heap += float64(ms1.HeapAlloc-ms0.HeapAlloc) / conns
		for _, c := range clients {
			c.Close()
		}
	}
	b.ReportMetric(stack/float64(b.N), "stack-B/conn")
	b.ReportMetric(heap/float64(b.N), "heap-B/conn")
}

// settle lets goroutines park and collections shrink their stacks (one
// halving per collection).
func settle() {
	for range 4 {
		time.Sleep(10 * time.Millisecond)
		runtime.GC()
	}
}

// openChat opens a TLS connection and a Chat stream on it, sends one
// message and reads the answer, as a sidecar's first request.
func openChat(b *testing.B, addr string, cfg *tls.Config) *tls.Conn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	tc := tls.Client(nc, cfg)
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	writeRequest(fr, "/skiff.test.Echo/Chat", false)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := f.(*http2.DataFrame); ok {
			return tc
		}
	}
}
