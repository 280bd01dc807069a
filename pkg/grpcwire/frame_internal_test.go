package grpcwire

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
)

// TestReadFrameReservesWhatArrives: a prefix that claims 200 MiB, followed
// by a few bytes and the end of the stream, is refused without 200 MiB
// being allocated; a message of 3 MiB (past the first chunk) reads whole.
func TestReadFrameReservesWhatArrives(t *testing.T) {
	var hdr [headerLen]byte
	claim := make([]byte, headerLen, headerLen+10)
	binary.BigEndian.PutUint32(claim[1:], 200<<20)
	claim = append(claim, "0123456789"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := readFrame(bytes.NewReader(claim), &hdr, 256<<20); CodeOf(err) != Internal {
		t.Errorf("truncated 200 MiB claim: %v, want Internal", err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("a 200 MiB claim with 10 bytes behind it allocated %d bytes", got)
	}

	msg := bytes.Repeat([]byte("abc"), 1<<20)
	framed := make([]byte, headerLen, headerLen+len(msg))
	binary.BigEndian.PutUint32(framed[1:], uint32(len(msg)))
	got, err := readFrame(bytes.NewReader(append(framed, msg...)), &hdr, 256<<20)
	if err != nil || !bytes.Equal(got, msg) {
		t.Errorf("3 MiB message: %d bytes, err %v", len(got), err)
	}
}
