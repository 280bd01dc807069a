package xds

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// TestWorkQueue: items run in the order added on at most limit goroutines,
// which all start when enough items wait and are gone once the queue is
// empty.
func TestWorkQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, n = 3, 10
		gate := make(chan struct{})
		var mu sync.Mutex
		var ran []int
		running, most := 0, 0
		q := newWorkQueue(limit, func(i int) {
			mu.Lock()
			ran = append(ran, i)
			running++
			most = max(most, running)
			mu.Unlock()
			<-gate
			mu.Lock()
			running--
			mu.Unlock()
		})
		for i := range n {
			q.add(i)
		}
		synctest.Wait() // every worker holds an item
		if running != limit || most != limit {
			t.Fatalf("%d items running (at most %d), want %d", running, most, limit)
		}
		for range n {
			gate <- struct{}{}
			synctest.Wait() // the freed worker took the next item, or ended
		}
		if most != limit {
			t.Errorf("%d items ran at once, want at most %d", most, limit)
		}
		// The first workers start together and take 0, 1 and 2 in order,
		// but may record them in any; the rest were taken one at a time.
		slices.Sort(ran[:limit])
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(ran, want) {
			t.Errorf("ran %v, want %v", ran, want)
		}
		q.mu.Lock()
		workers, items := q.workers, q.items
		q.mu.Unlock()
		if workers != 0 || items != nil {
			t.Errorf("after the queue emptied: %d workers, items %v; want none", workers, items)
		}
		q.add(n) // a later item starts a worker again
		gate <- struct{}{}
		synctest.Wait()
		if ran[len(ran)-1] != n {
			t.Errorf("the item added after the workers ended did not run: %v", ran)
		}
	})
}
