package grpcserver_test

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/http2"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
)

// TestCreditsInOneWrite: a DATA frame that brings both the connection's
// and its stream's received bytes to their credit thresholds is answered
// with both WINDOW_UPDATEs in one write to the connection.
func TestCreditsInOneWrite(t *testing.T) {
	s := grpcserver.New(grpcserver.Options{}) // HTTP/2's 64 KiB windows: both credited at 16 KiB
	s.RegisterService(&sinkDesc, sink{})
	addr, counted := serveCounted(t, s)
	c := rawDial(t, addr)
	c.until(func(f http2.Frame) bool { s, ok := f.(*http2.SettingsFrame); return ok && s.IsAck() })
	before := counted.writes.Load()

	// A message of 40000 bytes, not all sent: no answer comes.
	writeHeaders(c.fr, "/skiff.test.Sink/Put")
	data := make([]byte, 16384)
	binary.BigEndian.PutUint32(data[1:], 40000)
	if err := c.fr.WriteData(1, false, data); err != nil {
		t.Fatal(err)
	}
	credited := map[uint32]uint32{}
	c.until(func(f http2.Frame) bool {
		if w, ok := f.(*http2.WindowUpdateFrame); ok {
			credited[w.StreamID] += w.Increment
		}
		return credited[0] == 16384 && credited[1] == 16384
	})
	if n := counted.writes.Load() - before; n != 1 {
		t.Errorf("both WINDOW_UPDATEs in %d writes, want 1", n)
	}
}
