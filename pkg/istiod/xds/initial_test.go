package xds

import (
	"maps"
	"slices"
	"testing"
)

// TestSettleInitial: the initial versions a reconnecting delta client
// brings are forgotten as their names are sent or removed, and the map
// goes with its last entry (a Go map keeps its buckets otherwise).
func TestSettleInitial(t *testing.T) {
	rs := heldList(t, "v", 0, 1, 2)
	for _, tc := range []struct {
		name    string
		initial map[string]string
		sent    []int
		removed []string
		want    []string // names left; nil: the map is gone
	}{
		{"nothing brought", nil, []int{0}, nil, nil},
		{"all sent", map[string]string{"res-000": "a", "res-001": "b"}, []int{0, 1, 2}, nil, nil},
		{"sent and removed", map[string]string{"res-000": "a", "gone": "b"}, []int{0}, []string{"gone"}, nil},
		{"one left", map[string]string{"res-000": "a", "res-009": "b"}, []int{0}, nil, []string{"res-009"}},
		{"unsubscribed", map[string]string{"res-009": "b"}, nil, []string{"res-009"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watch{initial: tc.initial}
			var sent = rs[:0:0]
			for _, i := range tc.sent {
				sent = append(sent, rs[i])
			}
			w.settleInitial(sent, tc.removed)
			if tc.want == nil {
				if w.initial != nil {
					t.Fatalf("initial kept: %v", w.initial)
				}
				return
			}
			if got := slices.Sorted(maps.Keys(w.initial)); !slices.Equal(got, tc.want) {
				t.Fatalf("initial left: %v, want %v", got, tc.want)
			}
		})
	}
}
