package dnsproxy

import (
	"context"
	"encoding/binary"
	"time"
)

// waiters are the queries waiting on one upstream socket or connection, by
// ID. Several may share an ID, chained through next; an answer goes to the
// one whose question it carries. Adding one allocates nothing once the map
// has grown. Callers hold their own lock.
type waiters map[uint16]*waiter

// add records w.
func (ws waiters) add(w *waiter) {
	w.next = ws[w.id]
	ws[w.id] = w
}

// remove forgets w, if it still waits.
func (ws waiters) remove(w *waiter) {
	head := ws[w.id]
	if head == w {
		if w.next == nil {
			delete(ws, w.id)
		} else {
			ws[w.id] = w.next
		}
		w.next = nil
		return
	}
	for x := head; x != nil; x = x.next {
		if x.next == w {
			x.next, w.next = w.next, nil
			return
		}
	}
}

// match returns the waiter resp answers (same ID and question), or nil.
func (ws waiters) match(resp []byte) *waiter {
	id := binary.BigEndian.Uint16(resp)
	for w := ws[id]; w != nil; w = w.next {
		if answersQuery(resp, id, w.question) {
			return w
		}
	}
	return nil
}

// keepOnly forgets every waiter for which keep is false.
func (ws waiters) keepOnly(keep func(*waiter) bool) {
	for id, head := range ws {
		var kept, last *waiter
		for w := head; w != nil; {
			next := w.next
			w.next = nil
			if keep(w) {
				if last == nil {
					kept = w
				} else {
					last.next = w
				}
				last = w
			}
			w = next
		}
		if kept == nil {
			delete(ws, id)
		} else {
			ws[id] = kept
		}
	}
}

// wait returns what w's channel receives, or fails at deadline or when ctx
// ends.
func (w *waiter) wait(ctx context.Context, deadline time.Time) ([]byte, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case res := <-w.ch:
		return res.wire, res.err
	case <-t.C:
		return nil, context.DeadlineExceeded
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
