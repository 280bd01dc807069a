package xdsproxy

import (
	"context"
	"sync"
)

// queue is an unbounded FIFO: the downstream is never blocked by a slow or
// absent istiod (Istio's agent queues toward istiod without bound too).
type queue[T any] struct {
	mu     sync.Mutex
	items  []T
	signal chan struct{}
	done   bool
}

func newQueue[T any]() *queue[T] { return &queue[T]{signal: make(chan struct{}, 1)} }

func (q *queue[T]) notify() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	q.notify()
}

// unpop puts back an item that could not be sent.
func (q *queue[T]) unpop(v T) {
	q.mu.Lock()
	q.items = append([]T{v}, q.items...)
	q.mu.Unlock()
	q.notify()
}

// replace drops what is queued and queues vs instead (a replay after reconnect).
func (q *queue[T]) replace(vs []T) {
	q.mu.Lock()
	q.items = vs
	q.mu.Unlock()
	q.notify()
}

func (q *queue[T]) close() {
	q.mu.Lock()
	q.done = true
	q.mu.Unlock()
	q.notify()
}

func (q *queue[T]) closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.done
}

// pop waits for an item; false when the queue is closed and empty or ctx ends.
func (q *queue[T]) pop(ctx context.Context) (T, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return v, true
		}
		done := q.done
		q.mu.Unlock()
		var zero T
		if done {
			return zero, false
		}
		select {
		case <-q.signal:
		case <-ctx.Done():
			return zero, false
		}
	}
}
