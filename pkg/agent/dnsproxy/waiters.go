package dnsproxy

import (
	"context"
	"encoding/binary"
	"time"
)

// waiters are the queries waiting on one upstream socket or connection, by
// ID. Several may share an ID; an answer goes to the one whose question it
// carries. Callers hold their own lock.
type waiters map[uint16][]*waiter

// add records w.
func (ws waiters) add(w *waiter) { ws[w.id] = append(ws[w.id], w) }

// remove forgets w, if it still waits.
func (ws waiters) remove(w *waiter) {
	list := ws[w.id]
	for i, x := range list {
		if x == w {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(ws, w.id)
	} else {
		ws[w.id] = list
	}
}

// match returns the waiter resp answers (same ID and question), or nil.
func (ws waiters) match(resp []byte) *waiter {
	id := binary.BigEndian.Uint16(resp)
	for _, w := range ws[id] {
		if answersQuery(resp, id, w.question) {
			return w
		}
	}
	return nil
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
