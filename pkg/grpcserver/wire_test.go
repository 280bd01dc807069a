package grpcserver_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/keepalive"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
	"github.com/skiff-mesh/skiff/pkg/pki/pkitest"
)

// rawClient speaks HTTP/2 frames to a plaintext server.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	fr *http2.Framer
}

func rawDial(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c
}

// until reads frames, answering none, until one satisfies ok; it fails the
// test if the connection ends first.
func (c *rawClient) until(ok func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("reading frames: %v", err)
		}
		if ok(f) {
			return f
		}
	}
}

// closed reports whether the server closed the connection, reading and
// dropping frames until it does.
func (c *rawClient) closed() bool {
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
		}
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

func (c *rawClient) goAway() *http2.GoAwayFrame {
	c.t.Helper()
	return c.until(func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
}

// TestKeepalive: a quiet connection is pinged; one that answers stays, one
// that does not is closed after the timeout.
func TestKeepalive(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{Keepalive: keepalive.ServerParameters{Time: 50 * time.Millisecond, Timeout: 50 * time.Millisecond}})
	addr := serve(t, s)

	answering := rawDial(t, addr)
	for range 3 {
		p := answering.until(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() }).(*http2.PingFrame)
		if err := answering.fr.WritePing(true, p.Data); err != nil {
			t.Fatal(err)
		}
	}

	silent := rawDial(t, addr)
	silent.until(func(f http2.Frame) bool { _, ok := f.(*http2.PingFrame); return ok })
	if !silent.closed() {
		t.Error("a connection that did not answer the ping stayed open")
	}
}

// TestPingEnforcement: a client that pings more often than the policy
// allows gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" on the third
// strike, as from grpc-go.
func TestPingEnforcement(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{Enforcement: keepalive.EnforcementPolicy{MinTime: time.Hour, PermitWithoutStream: true}})
	c := rawDial(t, serve(t, s))
	for range 4 {
		if err := c.fr.WritePing(false, [8]byte{1}); err != nil {
			break // the server may have closed already
		}
	}
	g := c.goAway()
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || string(g.DebugData()) != "too_many_pings" {
		t.Errorf("GOAWAY %v %q", g.ErrCode, g.DebugData())
	}
}

// TestMaxConnectionAge: GOAWAY at the connection's age; an idle
// connection then closes.
func TestMaxConnectionAge(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{Keepalive: keepalive.ServerParameters{MaxConnectionAge: 50 * time.Millisecond, MaxConnectionAgeGrace: time.Hour}})
	c := rawDial(t, serve(t, s))
	if g := c.goAway(); g.ErrCode != http2.ErrCodeNo {
		t.Errorf("GOAWAY %v", g.ErrCode)
	}
	if !c.closed() {
		t.Error("an idle connection stayed open after its GOAWAY")
	}
}

// TestProtocolErrors: frames a server must refuse end the connection with
// the code RFC 9113 names, and the server goes on serving others.
func TestProtocolErrors(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{})
	s.RegisterService(&echoDesc, &echoService{})
	addr := serve(t, s)
	for _, tc := range []struct {
		name  string
		write func(*http2.Framer) error
		want  http2.ErrCode
	}{
		{"frame over 16 KiB", func(fr *http2.Framer) error { return fr.WriteData(1, false, make([]byte, 16385)) }, http2.ErrCodeFrameSize},
		{"DATA on an idle stream", func(fr *http2.Framer) error { return fr.WriteData(1, false, []byte("x")) }, http2.ErrCodeProtocol},
		{"HEADERS on an even stream", func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: []byte{0x82}, EndHeaders: true})
		}, http2.ErrCodeProtocol},
		{"a header block the decoder refuses", func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff}, EndHeaders: true})
		}, http2.ErrCodeCompression},
		{"PUSH_PROMISE", func(fr *http2.Framer) error {
			return fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, EndHeaders: true})
		}, http2.ErrCodeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, addr)
			c.fr.SetMaxReadFrameSize(1 << 20)
			if err := tc.write(c.fr); err != nil {
				t.Fatal(err)
			}
			if g := c.goAway(); g.ErrCode != tc.want {
				t.Errorf("GOAWAY %v, want %v", g.ErrCode, tc.want)
			}
			if !c.closed() {
				t.Error("the connection stayed open")
			}
		})
	}
	// Not a client preface.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if b, _ := io.ReadAll(nc); len(b) != 0 && !bytes.HasPrefix(b, []byte{0, 0}) {
		t.Errorf("answer to HTTP/1.1: %q", b)
	}
}

// TestStopDuringHandshake: Stop closes a connection still in its TLS
// handshake instead of waiting for the handshake's timeout.
func TestStopDuringHandshake(t *testing.T) {
	serverTLS, _ := pkitest.MutualTLS(t, spiffeID)
	s := grpcserver.New(grpcserver.Options{TLS: serverTLS})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(notifyListener{lis, accepted}) }()
	nc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A byte that begins a handshake record and no more: the server waits.
	nc.Write([]byte{22})
	<-accepted
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop waited for a connection's handshake")
	}
	if err := <-done; !errors.Is(err, grpcserver.ErrServerStopped) {
		t.Errorf("Serve: %v", err)
	}
}

// notifyListener reports each accepted connection.
type notifyListener struct {
	net.Listener
	accepted chan struct{}
}

func (l notifyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- struct{}{}
	}
	return c, err
}

// holdConn holds writes while hold is set, then sends them in one write.
type holdConn struct {
	net.Conn
	hold bool
	buf  bytes.Buffer
}

func (h *holdConn) Write(b []byte) (int, error) {
	if h.hold {
		return h.buf.Write(b)
	}
	return h.Conn.Write(b)
}

func (h *holdConn) flush() error {
	h.hold = false
	_, err := h.Conn.Write(h.buf.Bytes())
	return err
}

// TestRecordsInOneWrite: a request whose TLS records (the preface, each
// frame) arrive in one TCP segment is served whole: the server reads one
// record at a time (pkg/tlsrecord), and none waits for bytes already read.
func TestRecordsInOneWrite(t *testing.T) {
	serverTLS, clientTLS := pkitest.MutualTLS(t, spiffeID)
	s := grpcserver.New(grpcserver.Options{TLS: serverTLS})
	s.RegisterService(&echoDesc, &echoService{})
	nc, err := net.Dial("tcp", serve(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	hc := &holdConn{Conn: nc}
	cfg := clientTLS.Clone()
	cfg.NextProtos = []string{"h2"}
	tc := tls.Client(hc, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	hc.hold = true
	// Each Write below is a TLS record of its own.
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	writeRequest(fr, "/skiff.test.Echo/Echo", true)
	if err := hc.flush(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("before the answer's trailers: %v", err)
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamEnded() {
			if st := h.PseudoValue("status"); st != "" && h.Fields[len(h.Fields)-1].Name != "grpc-status" {
				t.Errorf("trailers-only answer: %v", h.Fields)
			}
			for _, hf := range h.Fields {
				if hf.Name == "grpc-status" && hf.Value != "0" {
					t.Errorf("grpc-status %s", hf.Value)
				}
			}
			return
		}
	}
}

// TestWindowOverflow: a WINDOW_UPDATE that takes a stream's window past
// 2^31-1 resets that stream with FLOW_CONTROL_ERROR, and the connection
// goes on.
func TestWindowOverflow(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{})
	s.RegisterService(&echoDesc, &echoService{})
	c := rawDial(t, serve(t, s))
	writeRequest(c.fr, "/skiff.test.Echo/Chat", false)
	c.until(func(f http2.Frame) bool { _, ok := f.(*http2.DataFrame); return ok })
	if err := c.fr.WriteWindowUpdate(1, 1<<31-1); err != nil {
		t.Fatal(err)
	}
	rst := c.until(func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok }).(*http2.RSTStreamFrame)
	if rst.StreamID != 1 || rst.ErrCode != http2.ErrCodeFlowControl {
		t.Errorf("RST_STREAM %d %v, want 1 FLOW_CONTROL_ERROR", rst.StreamID, rst.ErrCode)
	}
	if err := c.fr.WritePing(false, [8]byte{7}); err != nil {
		t.Fatal(err)
	}
	c.until(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
}
