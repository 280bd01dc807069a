package grpcserver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/skiff-mesh/skiff/pkg/bufpool"
)

const (
	// maxFrame is the largest frame payload read (HTTP/2's default
	// SETTINGS_MAX_FRAME_SIZE, which the server never raises).
	maxFrame = 16384
	// creditAt is when received bytes are credited back to the peer with
	// a WINDOW_UPDATE: a quarter of the default 64 KiB window.
	creditAt = 16384
	// queueLimit bounds the bytes of complete messages a stream holds
	// before its handler receives them; past it the stream's window is
	// not credited until the handler catches up.
	queueLimit = 65535
	// maxHeaderBlock bounds a request's header block.
	maxHeaderBlock = 64 << 10
	// initialWindow is HTTP/2's default window, for both directions.
	initialWindow = 65535
)

var clientPreface = []byte(http2.ClientPreface)

// framePool holds buffers of one frame, header included, for the writers'
// frames; none is kept by an idle connection.
var framePool = sync.Pool{New: func() any { b := make([]byte, 9+maxFrame, 9+maxFrame+frameSpare); return &b }}

// frameSpare is room in a pooled buffer for the response headers and a
// unary call's trailers written with a DATA frame.
const frameSpare = 512

// readBuffers holds the buffers frames are read into, each of its size's
// tier: most frames a control plane reads are ACKs, window updates and
// pings of a few hundred bytes or less. Read into framePool's buffers,
// each one the pool could not supply cost 18 KiB; through endpoint changes
// to 1000 sidecars those were two fifths of what istiod allocated.
var readBuffers bufpool.Tiered

// conn is one HTTP/2 connection: its reader goroutine owns the read side;
// writers hold wmu for one write: a frame, or up to writeFrames frames
// of a message.
type conn struct {
	s      *Server
	nc     net.Conn        // the frames' stream: sock, or a tls.Conn over it
	sock   *corkConn       // the socket
	ctx    context.Context // the peer's; ends when the connection closes
	cancel context.CancelCauseFunc

	// The reader's: the frame header being read, the header block awaiting
	// CONTINUATION frames, the highest stream opened, ping enforcement.
	hdr         [9]byte
	dec         *hpack.Decoder
	block       []byte
	blockStream uint32
	blockEnd    bool
	maxStream   uint32
	lastPing    time.Time
	pingStrikes int

	read    atomic.Bool // a frame was read since the keepalive timer looked
	wrote   atomic.Bool // headers or data were sent since the last client ping
	pingOut bool        // keepalive timer's: a ping awaits its answer
	kaTimer *time.Timer // set under mu
	ageEnd  *time.Timer // set under mu

	// wmu serialises frames and guards the header encoder.
	wmu    sync.Mutex
	enc    *hpack.Encoder
	encBuf bytes.Buffer

	mu        sync.Mutex
	cond      sync.Cond // on mu: windows grew, a stream or the connection ended
	streams   map[uint32]*stream
	sendWin   int64 // the connection's send window
	initWin   int64 // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	maxData   int   // the largest DATA payload sent
	credit    int   // connection-level bytes received, not yet credited
	goingAway bool
	closed    bool
}

func tlsInfo(cs tls.ConnectionState) credentials.TLSInfo {
	return credentials.TLSInfo{State: cs, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
}

// newConn makes a connection whose frames go through nc to sock: nc is
// sock on plaintext, a tls.Conn over it on TLS. authInfo is the TLS
// handshake's, nil on plaintext.
func newConn(s *Server, nc net.Conn, sock *corkConn, authInfo credentials.AuthInfo) *conn {
	c := &conn{s: s, nc: nc, sock: sock, streams: map[uint32]*stream{}, sendWin: initialWindow, initWin: initialWindow, maxData: maxFrame}
	p := &peer.Peer{Addr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr()}
	if authInfo != nil {
		p.AuthInfo = authInfo
		// A frame and its header fill one TLS record.
		c.maxData = maxFrame - 9
	}
	c.ctx, c.cancel = context.WithCancelCause(peer.NewContext(context.Background(), p))
	c.cond.L = &c.mu
	c.dec = hpack.NewDecoder(4096, nil)
	c.dec.SetMaxStringLength(maxHeaderBlock)
	c.enc = hpack.NewEncoder(&c.encBuf)
	// Responses are indexed in no table: a connection keeps none.
	c.enc.SetMaxDynamicTableSizeLimit(0)
	return c
}

// streamCreditAt is when a stream's received bytes are credited back: at
// half a small window (a quarter made a client's 100 KiB request cost
// twice the WINDOW_UPDATEs and records), at most at creditAt.
func (s *Server) streamCreditAt() int { return min(creditAt, s.opts.StreamWindow/2) }

// connError ends the connection with a GOAWAY carrying code.
type connError struct {
	code http2.ErrCode
	msg  string
}

func (e connError) Error() string { return fmt.Sprintf("HTTP/2 %v: %s", e.code, e.msg) }

// serve reads frames until the connection fails or closes.
func (c *conn) serve() {
	defer c.s.forget(c)
	err := c.readLoop()
	var ce connError
	if errors.As(err, &ce) {
		c.s.log.Debug("connection error", "peer", c.nc.RemoteAddr().String(), "err", err)
		c.writeGoAway(ce.code, ce.msg)
	}
	c.close(err)
}

func (c *conn) readLoop() error {
	var preface [24]byte
	if _, err := io.ReadFull(c.nc, preface[:]); err != nil {
		return err
	}
	if !bytes.Equal(preface[:], clientPreface) {
		return errors.New("not an HTTP/2 client preface")
	}
	settings := binary.BigEndian.AppendUint16(nil, uint16(http2.SettingMaxConcurrentStreams))
	settings = binary.BigEndian.AppendUint32(settings, c.s.opts.MaxConcurrentStreams)
	if w := c.s.opts.StreamWindow; w != initialWindow {
		settings = binary.BigEndian.AppendUint16(settings, uint16(http2.SettingInitialWindowSize))
		settings = binary.BigEndian.AppendUint32(settings, uint32(w))
	}
	if err := c.writeFrame(http2.FrameSettings, 0, 0, settings); err != nil {
		return err
	}
	c.startTimers()
	first := true
	for {
		if _, err := io.ReadFull(c.nc, c.hdr[:]); err != nil {
			return err
		}
		c.read.Store(true)
		n := int(c.hdr[0])<<16 | int(c.hdr[1])<<8 | int(c.hdr[2])
		typ, flags := http2.FrameType(c.hdr[3]), http2.Flags(c.hdr[4])
		id := binary.BigEndian.Uint32(c.hdr[5:]) & (1<<31 - 1)
		if n > maxFrame {
			return connError{http2.ErrCodeFrameSize, fmt.Sprintf("frame of %d bytes", n)}
		}
		if first && typ != http2.FrameSettings {
			return connError{http2.ErrCodeProtocol, "first frame is not SETTINGS"}
		}
		first = false
		if c.block != nil && typ != http2.FrameContinuation {
			return connError{http2.ErrCodeProtocol, "header block interrupted"}
		}
		bp := readBuffers.Get(n)
		p := *bp
		_, err := io.ReadFull(c.nc, p)
		if err == nil {
			err = c.frame(typ, flags, id, p)
		}
		readBuffers.Put(bp)
		if err != nil {
			return err
		}
	}
}

// frame handles one frame read.
func (c *conn) frame(typ http2.FrameType, flags http2.Flags, id uint32, p []byte) error {
	switch typ {
	case http2.FrameData:
		return c.data(flags, id, p)
	case http2.FrameHeaders:
		return c.headers(flags, id, p)
	case http2.FrameContinuation:
		if c.block == nil || id != c.blockStream {
			return connError{http2.ErrCodeProtocol, "unexpected CONTINUATION"}
		}
		if len(c.block)+len(p) > maxHeaderBlock {
			return connError{http2.ErrCodeProtocol, "header block too large"}
		}
		c.block = append(c.block, p...)
		if flags.Has(http2.FlagContinuationEndHeaders) {
			block, end := c.block, c.blockEnd
			c.block = nil
			return c.open(id, block, end)
		}
		return nil
	case http2.FrameRSTStream:
		if id == 0 || len(p) != 4 {
			return connError{http2.ErrCodeProtocol, "malformed RST_STREAM"}
		}
		c.resetByPeer(id)
		return nil
	case http2.FrameSettings:
		return c.settings(flags, id, p)
	case http2.FramePing:
		return c.ping(flags, id, p)
	case http2.FrameGoAway:
		c.mu.Lock()
		c.goingAway = true
		idle := len(c.streams) == 0
		c.mu.Unlock()
		if idle {
			return io.EOF
		}
		return nil
	case http2.FrameWindowUpdate:
		return c.windowUpdate(id, p)
	case http2.FramePushPromise:
		return connError{http2.ErrCodeProtocol, "PUSH_PROMISE from a client"}
	}
	// PRIORITY and unknown types are ignored, as RFC 9113 asks.
	return nil
}

// unpad strips a PADDED frame's padding.
func unpad(flags http2.Flags, p []byte) ([]byte, error) {
	if !flags.Has(http2.FlagDataPadded) { // the same bit for HEADERS
		return p, nil
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, connError{http2.ErrCodeProtocol, "bad padding"}
	}
	return p[1 : len(p)-int(p[0])], nil
}

func (c *conn) settings(flags http2.Flags, id uint32, p []byte) error {
	if id != 0 {
		return connError{http2.ErrCodeProtocol, "SETTINGS on a stream"}
	}
	if flags.Has(http2.FlagSettingsAck) {
		return nil
	}
	if len(p)%6 != 0 {
		return connError{http2.ErrCodeFrameSize, "malformed SETTINGS"}
	}
	c.mu.Lock()
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch http2.SettingID(binary.BigEndian.Uint16(p)) {
		case http2.SettingInitialWindowSize:
			if v > 1<<31-1 {
				c.mu.Unlock()
				return connError{http2.ErrCodeFlowControl, "initial window too large"}
			}
			delta := int64(v) - c.initWin
			c.initWin = int64(v)
			for _, st := range c.streams {
				st.sendWin += delta
			}
		case http2.SettingMaxFrameSize:
			if v < 16384 || v > 1<<24-1 {
				c.mu.Unlock()
				return connError{http2.ErrCodeProtocol, "bad SETTINGS_MAX_FRAME_SIZE"}
			}
			// Frames stay at most 16 KiB: the buffers are that size.
		}
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.writeFrame(http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
}

func (c *conn) windowUpdate(id uint32, p []byte) error {
	if len(p) != 4 {
		return connError{http2.ErrCodeFrameSize, "malformed WINDOW_UPDATE"}
	}
	inc := int64(binary.BigEndian.Uint32(p) & (1<<31 - 1))
	if inc == 0 {
		if id == 0 {
			return connError{http2.ErrCodeProtocol, "WINDOW_UPDATE of 0"}
		}
		c.resetStream(id, http2.ErrCodeProtocol)
		return nil
	}
	c.mu.Lock()
	overflow := false
	if id == 0 {
		if c.sendWin += inc; c.sendWin > 1<<31-1 {
			c.mu.Unlock()
			return connError{http2.ErrCodeFlowControl, "connection window overflow"}
		}
	} else if st := c.streams[id]; st != nil {
		st.sendWin += inc
		overflow = st.sendWin > 1<<31-1
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	if overflow {
		// A stream error (RFC 9113, 6.9.1).
		c.resetStream(id, http2.ErrCodeFlowControl)
	}
	return nil
}

// ping answers a client's ping and enforces the policy's minimum interval
// between them (grpc-go's: more than two strikes end the connection).
func (c *conn) ping(flags http2.Flags, id uint32, p []byte) error {
	if id != 0 || len(p) != 8 {
		return connError{http2.ErrCodeProtocol, "malformed PING"}
	}
	if flags.Has(http2.FlagPingAck) {
		return nil // the keepalive timer only needs the read
	}
	now := time.Now()
	if c.wrote.Swap(false) {
		c.pingStrikes, c.lastPing = 0, time.Time{}
	}
	if !c.lastPing.IsZero() && now.Sub(c.lastPing) < c.s.opts.Enforcement.MinTime {
		c.pingStrikes++
	}
	c.lastPing = now
	if c.pingStrikes > 2 {
		return connError{http2.ErrCodeEnhanceYourCalm, "too_many_pings"}
	}
	return c.writeFrame(http2.FramePing, http2.FlagPingAck, 0, p)
}

// startTimers starts keepalive and the connection's maximum age, once the
// server's SETTINGS are out.
func (c *conn) startTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	ka := c.s.opts.Keepalive
	if ka.Time > 0 {
		c.kaTimer = time.AfterFunc(ka.Time, c.keepalive)
	}
	if ka.MaxConnectionAge > 0 {
		// grpc-go's jitter: +/- 10 %.
		age := ka.MaxConnectionAge + time.Duration((rand.Float64()*0.2-0.1)*float64(ka.MaxConnectionAge))
		c.ageEnd = time.AfterFunc(age, c.aged)
	}
}

// keepalive runs on the keepalive timer: a quiet connection is pinged,
// and closed when nothing came back within the timeout.
func (c *conn) keepalive() {
	ka := c.s.opts.Keepalive
	if c.read.Swap(false) {
		c.pingOut = false
		c.kaTimer.Reset(ka.Time)
		return
	}
	if c.pingOut {
		c.close(errors.New("keepalive ping not answered"))
		return
	}
	c.pingOut = true
	if c.writeFrame(http2.FramePing, 0, 0, make([]byte, 8)) != nil {
		return
	}
	c.kaTimer.Reset(cmp.Or(ka.Timeout, 20*time.Second))
}

// aged sends GOAWAY at the connection's maximum age and closes it after
// the grace period (sooner once its streams are done).
func (c *conn) aged() {
	c.mu.Lock()
	c.goingAway = true
	last := c.maxStream
	idle := len(c.streams) == 0
	c.mu.Unlock()
	c.writeGoAwayLast(last, http2.ErrCodeNo, "max_age")
	if idle {
		c.close(errors.New("maximum connection age"))
		return
	}
	grace := c.s.opts.Keepalive.MaxConnectionAgeGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	time.AfterFunc(grace, func() { c.close(errors.New("maximum connection age")) })
}

// close ends the connection: every stream's context ends and waiting
// writers return.
func (c *conn) close(cause error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.cond.Broadcast()
	ka, age := c.kaTimer, c.ageEnd
	c.mu.Unlock()
	if cause == nil {
		cause = io.EOF
	}
	c.cancel(cause)
	if ka != nil {
		ka.Stop()
	}
	if age != nil {
		age.Stop()
	}
	if !c.wmu.TryLock() {
		// A writer holds the socket, perhaps stuck on a peer that reads
		// nothing, or this goroutine's write failed: end the write at
		// once, with no close_notify, as tls.Conn does when closed during
		// a Write.
		c.sock.Close()
		return
	}
	c.nc.Close()
	c.wmu.Unlock()
}
