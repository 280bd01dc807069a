package grpcserver

import "sync"

// admission bounds the bytes of large messages the server holds received
// and not yet taken by their handlers, across its connections. A message
// is large when it is bigger than a stream's window: its client cannot
// send all of it before the window is credited, so a stream whose message
// does not fit the budget waits with its window withheld, holding at most
// a window of it, until earlier messages are taken (FIFO). When istiod
// restarts, every sidecar opens a stream with about 100 KiB of versions per
// type at once; handled a few at a time, they would otherwise all sit
// received in memory.
type admission struct {
	mu      sync.Mutex
	budget  int
	free    int
	waiting []waiter
}

// waiter is a stream waiting for room for its message of size bytes.
type waiter struct {
	st   *stream
	size int
}

// admit reserves size bytes for st's next message, or queues st and
// reports false. A message bigger than the whole budget is admitted alone.
func (a *admission) admit(st *stream, size int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.waiting) == 0 && (size <= a.free || a.free == a.budget) {
		a.free -= size
		return true
	}
	a.waiting = append(a.waiting, waiter{st, size})
	return false
}

// release returns n bytes and takes the streams now first in line out
// of it, with room reserved for them.
func (a *admission) release(n int) []waiter {
	if n == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free += n
	var admitted []waiter
	for len(a.waiting) > 0 {
		w := a.waiting[0]
		if w.size > a.free && a.free < a.budget {
			break
		}
		a.free -= w.size
		a.waiting[0] = waiter{}
		a.waiting = a.waiting[1:]
		admitted = append(admitted, w)
	}
	if len(a.waiting) == 0 {
		a.waiting = nil
	}
	return admitted
}

// release gives n bytes back to the budget and lets in the streams it now
// has room for. Their WINDOW_UPDATEs go out on a goroutine of their own,
// counted with the handlers: written from the handler that released (TLS,
// other connections), they would grow its stack, which it then keeps
// while it waits. The caller is a handler, so the count is above zero.
func (s *Server) release(n int) {
	admitted := s.adm.release(n)
	if len(admitted) == 0 {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, w := range admitted {
			w.st.admitted(w.size)
		}
	}()
}

// forget takes st out of the line, if it waits there.
func (a *admission) forget(st *stream) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, w := range a.waiting {
		if w.st == st {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			return
		}
	}
}

// large reports whether a message of size bytes goes through admission.
func (s *Server) large(size int) bool { return size > s.opts.StreamWindow }

// admitted lets a waiting stream's message in: its buffer grows to the
// whole message and the bytes withheld are credited to its client.
func (st *stream) admitted(size int) {
	c := st.c
	c.mu.Lock()
	if st.done {
		c.mu.Unlock()
		c.s.release(size)
		return
	}
	st.blocked = false
	st.msg = append(make([]byte, 0, size), st.msg...)
	var credit int
	if st.queued <= queueLimit && !st.halfClosed && !st.reset {
		credit, st.credit, st.withheld = st.credit+st.withheld, 0, 0
	}
	c.mu.Unlock()
	if credit > 0 {
		c.writeWindowUpdate(st.id, credit)
	}
}

// held is what st holds of the budget, which it gives up when it ends:
// its queued large messages and the one it receives, if admitted. Under
// conn.mu.
func (st *stream) held() int {
	n := 0
	for _, m := range st.queue {
		if st.c.s.large(len(m)) {
			n += len(m)
		}
	}
	if st.msg != nil && !st.blocked && st.c.s.large(st.size) {
		n += st.size
	}
	return n
}
