package dnsproxy

import "testing"

// TestRandomID: IDs spread over the 16-bit space, and taking one
// allocates nothing (it runs for every forwarded query).
func TestRandomID(t *testing.T) {
	seen := map[uint16]bool{}
	for range 1000 {
		seen[randomID()] = true
	}
	if len(seen) < 950 { // 1000 draws from 65536: about 8 repeats expected
		t.Errorf("%d distinct IDs in 1000", len(seen))
	}
	if n := testing.AllocsPerRun(100, func() { _ = randomID() }); n != 0 && !raceEnabled {
		t.Errorf("%v allocations per ID", n)
	}
}
