package model

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPodIndexPatchMatchesBuild: through random changes to a sorted list
// of pods (new pods, pods gone, written again, relabelled, given another
// address or one another pod frees, host-network pods sharing an
// address), the index next returns finds the same pod by every name and
// address as one built from the list, and names the same moved keys as
// comparing the two whole. Most steps are patches; those that touch a
// shared address or pile up past maxPodPatch build the index again.
func TestPodIndexPatchMatchesBuild(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 15))
	const names, nodes = 60, 3
	pods := map[nsName]*Pod{}
	var freed []string // addresses of pods gone, for new pods to take
	ip := func() string {
		if len(freed) > 0 && r.IntN(3) == 0 {
			a := freed[0]
			freed = freed[1:]
			return a
		}
		return fmt.Sprintf("10.1.%d.%d", r.IntN(250), r.IntN(250))
	}
	newPod := func(k nsName) *Pod {
		p := &Pod{Namespace: k.ns, Name: k.name, Labels: map[string]string{"v": fmt.Sprint(r.IntN(3))}}
		switch r.IntN(20) {
		case 0: // host network: the node's address
			p.IPs = []string{fmt.Sprintf("192.168.0.%d", r.IntN(nodes))}
		case 1: // dual-stack
			p.IPs = []string{ip(), fmt.Sprintf("fd00::%d", r.IntN(90))}
		case 2: // not running yet
		default:
			p.IPs = []string{ip()}
		}
		return p
	}
	list := func() []*Pod {
		out := slices.Collect(maps.Values(pods))
		slices.SortFunc(out, comparePods)
		return out
	}
	ix := indexPods(list())
	patched, built := 0, 0
	for step := range 2000 {
		for range 1 + r.IntN(3) {
			k := nsName{[]string{"a", "a-b", "shop"}[r.IntN(3)], fmt.Sprintf("p%d", r.IntN(names))}
			switch old := pods[k]; {
			case old != nil && r.IntN(3) == 0:
				delete(pods, k)
				freed = append(freed, old.IPs...)
			case old != nil && r.IntN(2) == 0: // the same pod, written again
				p := *old
				pods[k] = &p
			default:
				if old != nil {
					freed = append(freed, old.IPs...)
				}
				pods[k] = newPod(k)
			}
		}
		in := list()
		next, moved := ix.next(in)
		want := indexPods(in)
		if next.root != nil {
			patched++
		} else {
			built++
		}
		for k, p := range want.names {
			if got := next.byName(k.ns, k.name); got != p {
				t.Fatalf("step %d: pod %v is %p, want %p", step, k, got, p)
			}
		}
		for a, p := range want.ips {
			if got := next.byIP(a); got != p {
				t.Fatalf("step %d: address %s finds %v, want %v", step, a, got, p)
			}
		}
		flat := next.flat()
		if len(flat.names) != len(want.names) || len(flat.ips) != len(want.ips) {
			t.Fatalf("step %d: %d names and %d addresses, want %d and %d", step, len(flat.names), len(flat.ips), len(want.names), len(want.ips))
		}
		wantMoved := changedPodKeys(ix.flat(), want)
		if !maps.Equal(moved.names, wantMoved.names) || !maps.Equal(moved.ips, wantMoved.ips) {
			t.Fatalf("step %d: moved %v, want %v", step, moved, wantMoved)
		}
		ix = next
	}
	t.Logf("%d steps patched, %d built again", patched, built)
	if patched < 1500 || built == 0 {
		t.Errorf("%d steps patched, %d built again: the run tested too little of one path", patched, built)
	}
}

// TestDiffPods: the pods gone and come between two lists, and lists that
// are not sorted strictly.
func TestDiffPods(t *testing.T) {
	p := func(ns, name string) *Pod { return &Pod{Namespace: ns, Name: name} }
	a1, a2, b1, b2 := p("a", "1"), p("a", "2"), p("b", "1"), p("b", "2")
	a2again := p("a", "2")
	for _, c := range []struct {
		name       string
		a, b       []*Pod
		gone, came []*Pod
		ok         bool
	}{
		{"same", []*Pod{a1, a2, b1}, []*Pod{a1, a2, b1}, nil, nil, true},
		{"one new", []*Pod{a1, b1}, []*Pod{a1, a2, b1}, nil, []*Pod{a2}, true},
		{"one gone", []*Pod{a1, a2, b1}, []*Pod{a1, b1}, []*Pod{a2}, nil, true},
		{"written again", []*Pod{a1, a2, b1}, []*Pod{a1, a2again, b1}, []*Pod{a2}, []*Pod{a2again}, true},
		{"all new", nil, []*Pod{a1, b2}, nil, []*Pod{a1, b2}, true},
		{"all gone", []*Pod{a1, b2}, nil, []*Pod{a1, b2}, nil, true},
		{"tail gone and head new", []*Pod{a2, b1, b2}, []*Pod{a1, a2}, []*Pod{b1, b2}, []*Pod{a1}, true},
		{"swapped", []*Pod{a1, a2}, []*Pod{a2, a1}, nil, nil, false},
		{"a shared run out of order", []*Pod{a1, a2, b1}, []*Pod{b1, a1, a2}, nil, nil, false},
		{"twice", []*Pod{a1}, []*Pod{a1, a1}, nil, nil, false},
		{"two of one name", []*Pod{a2}, []*Pod{a2, a2again}, nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gone, came, ok := diffPods(c.a, c.b)
			if ok != c.ok || (ok && (!slices.Equal(gone, c.gone) || !slices.Equal(came, c.came))) {
				t.Errorf("gone %v, came %v, ok %v; want %v, %v, %v", gone, came, ok, c.gone, c.came, c.ok)
			}
		})
	}
}
