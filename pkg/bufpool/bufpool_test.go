package bufpool

import (
	"testing"

	"google.golang.org/grpc/mem"
)

// TestTiered: a buffer's capacity is the tier above its length.
func TestTiered(t *testing.T) {
	for _, tc := range []struct {
		n, wantCap int
	}{
		{0, 1 << 10},
		{1, 1 << 10},
		{1 << 10, 1 << 10},
		{1<<10 + 1, 1 << 11},
		{50_000, 1 << 16}, // a 1000-cluster ACK: 64 KiB, not gRPC's 1 MiB
		{1 << 24, 1 << 24},
		{1<<24 + 1, 1<<24 + 1}, // beyond the tiers: exact, not pooled
	} {
		var p Tiered
		b := p.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(*b), cap(*b), tc.n, tc.wantCap)
		}
		p.Put(b)
	}
}

// TestTieredCopy checks a request spread over frames is copied whole
// into a reused (not cleared) buffer.
func TestTieredCopy(t *testing.T) {
	var p Tiered
	dirty := p.Get(3000)
	for i := range *dirty {
		(*dirty)[i] = 0xff
	}
	p.Put(dirty)
	frames := mem.BufferSlice{mem.SliceBuffer([]byte("hello, ")), mem.SliceBuffer([]byte("world"))}
	buf := frames.MaterializeToBuffer(&p)
	defer buf.Free()
	if got := string(buf.ReadOnlyData()); got != "hello, world" {
		t.Fatalf("copy %q, want %q", got, "hello, world")
	}
}
