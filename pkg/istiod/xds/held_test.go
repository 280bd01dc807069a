package xds

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// heldList builds resources named res-NNN for each index, with content v.
func heldList(t *testing.T, v string, idx ...int) []*gen.Resource {
	t.Helper()
	var rs []*gen.Resource
	for _, i := range idx {
		name := fmt.Sprintf("res-%03d", i)
		r, err := gen.NewResourceForTest(name, wrapperspb.String(v+name))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func namesAndHashes(rs []*gen.Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s/%d", r.Name, r.Hash))
	}
	return out
}

// TestChangedAndOverlay checks both paths (binary search for few updates,
// one merge for many) against the plain definition.
func TestChangedAndOverlay(t *testing.T) {
	held := heldList(t, "a", seq(0, 200)...)
	mixed := slices.Clone(held) // the held resources themselves, one replaced
	mixed[57] = heldList(t, "b", 57)[0]
	for _, tc := range []struct {
		name string
		upd  []*gen.Resource
	}{
		{"one changed", heldList(t, "b", 57)},
		{"one unchanged", heldList(t, "a", 57)},
		{"first and last changed", heldList(t, "b", 0, 199)},
		{"new names among old", heldList(t, "b", 1000, 1001)},
		{"many changed", heldList(t, "b", seq(0, 100)...)},
		{"all unchanged", heldList(t, "a", seq(0, 200)...)},
		{"none", nil},
		{"the held resources", held},
		{"the held resources but one", mixed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(held)
			// The definition: a name's content in upd wins.
			byName := map[string]*gen.Resource{}
			for _, r := range held {
				byName[r.Name] = r
			}
			var wantChanged []*gen.Resource
			for _, r := range tc.upd {
				if h, ok := byName[r.Name]; !ok || h.Hash != r.Hash {
					wantChanged = append(wantChanged, r)
				}
				byName[r.Name] = r
			}
			var want []*gen.Resource
			for _, r := range byName {
				want = append(want, r)
			}
			slices.SortFunc(want, func(a, b *gen.Resource) int { return byName2(a, b) })
			if diff := cmp.Diff(namesAndHashes(wantChanged), namesAndHashes(changed(held, tc.upd))); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
			var o overlays
			got := o.overlay(held, tc.upd)
			if diff := cmp.Diff(namesAndHashes(want), namesAndHashes(got)); diff != "" {
				t.Errorf("overlay (-want +got):\n%s", diff)
			}
			if !slices.Equal(held, before) {
				t.Error("overlay modified held")
			}
			// Equal updates of the same held list share one result.
			again := o.overlay(held, slices.Clone(tc.upd))
			if len(again) > 0 && &again[0] != &got[0] {
				t.Error("an equal overlay of the same list was not shared")
			}
			// Another list with the same contents is not the same list.
			other := o.overlay(slices.Clone(held), tc.upd)
			if len(other) > 0 && &other[0] == &got[0] {
				t.Error("an overlay of a different list was shared")
			}
		})
	}
}

func byName2(a, b *gen.Resource) int { return byName(a, b.Name) }

// TestListsShare checks equal lists are shared while one is in use, and
// that different contents are not.
func TestListsShare(t *testing.T) {
	var l lists
	a := heldList(t, "a", seq(0, 50)...)
	if got := l.share(a); &got[0] != &a[0] {
		t.Fatal("the first list was not kept")
	}
	b := heldList(t, "a", seq(0, 50)...) // equal contents, another array
	// Compared the first time, then known as equal.
	for range 2 {
		if got := l.share(b); &got[0] != &a[0] {
			t.Error("an equal list was not shared")
		}
	}
	d := heldList(t, "a", seq(0, 50)...) // a third array, after b
	if got := l.share(d); &got[0] != &a[0] {
		t.Error("a second equal list was not shared")
	}
	if got := l.share(b); &got[0] != &a[0] {
		t.Error("the first equal list was not shared after the second")
	}
	c := heldList(t, "c", seq(0, 50)...)
	if got := l.share(c); &got[0] != &c[0] {
		t.Error("a list of other contents was shared")
	}
	small := heldList(t, "a", 1, 2)
	if got := l.share(small); &got[0] != &small[0] {
		t.Error("a short list was replaced")
	}
}

// TestPushEventDiff: a push event compares a held list with a generated
// one once, and gives the connections that hold and are given the same
// lists that result; other lists, and answers to requests (no event), are
// compared anew.
func TestPushEventDiff(t *testing.T) {
	held := heldList(t, "a", seq(0, 50)...)
	next := append(heldList(t, "b", 0, 1), held[2:40]...) // two changed, ten gone
	ev := &pushEvent{}
	calls := 0
	count := func(h, n []*gen.Resource) []*gen.Resource { calls++; return changed(h, n) }
	first := ev.changedMemo.get(held, next, count)
	if again := ev.changedMemo.get(held, next, count); calls != 1 || &again[0] != &first[0] {
		t.Errorf("%d comparisons for one pair of lists, want 1", calls)
	}
	if got, want := namesAndHashes(first), namesAndHashes(changed(held, next)); !slices.Equal(got, want) {
		t.Errorf("changed %v, want %v", got, want)
	}
	other := slices.Clone(held) // equal contents, another array
	ev.changedMemo.get(other, next, count)
	if calls != 2 {
		t.Error("another held list was given the first one's result")
	}
	if got, want := ev.missing(held, next), missing(held, next); !slices.Equal(got, want) || len(got) != 10 {
		t.Errorf("missing %v, want %v (10 names)", got, want)
	}
	var none *pushEvent
	if got := none.changed(held, next); len(got) != 2 {
		t.Errorf("without an event: %d changed, want 2", len(got))
	}
}
