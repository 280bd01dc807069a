package certs

import (
	"crypto/x509"
	"log/slog"
	"testing"
	"time"
)

// TestRotateIn: rotation comes when GraceRatio of the lifetime is left,
// moved by no more than GraceJitter of it, and the jitter spreads pods out.
func TestRotateIn(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(24 * time.Hour)}
	for _, tc := range []struct {
		ratio, jitter float64
	}{{0.5, 0}, {0.5, 0.01}, {0.25, 0.1}} {
		m := NewManager(Options{GraceRatio: tc.ratio, GraceJitter: tc.jitter}, nil, slog.New(slog.DiscardHandler))
		want := time.Duration(float64(24*time.Hour) * (1 - tc.ratio))
		spread := time.Duration(tc.jitter * float64(24*time.Hour))
		seen := map[time.Duration]bool{}
		for range 50 {
			got := m.rotateIn(leaf, now, now)
			if got < want-spread || got > want+spread {
				t.Fatalf("ratio %v jitter %v: rotate in %v, want %v ± %v", tc.ratio, tc.jitter, got, want, spread)
			}
			seen[got] = true
		}
		if tc.jitter > 0 && len(seen) < 2 {
			t.Errorf("ratio %v jitter %v: every rotation at %v", tc.ratio, tc.jitter, want)
		}
		if tc.jitter == 0 && len(seen) != 1 {
			t.Errorf("ratio %v without jitter: %d rotation times", tc.ratio, len(seen))
		}
	}
}
