package dnsproxy

import (
	"testing"

	"github.com/miekg/dns"
)

// TestWaitersSharingAnID: waiters with one ID are told apart by question,
// and removing or filtering any of them (head, middle, tail) keeps the
// others matched; the map entry goes with the last.
func TestWaitersSharingAnID(t *testing.T) {
	query := func(id uint16, name string) (*waiter, []byte) {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.Id = id
		packed, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		qid, question, err := queryKey(packed)
		if err != nil {
			t.Fatal(err)
		}
		r := new(dns.Msg)
		r.SetReply(m)
		resp, err := r.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return &waiter{id: qid, question: question}, resp
	}
	ws := waiters{}
	var all []*waiter
	var resps [][]byte
	for _, name := range []string{"a.example.", "b.example.", "c.example.", "d.example."} {
		w, resp := query(7, name)
		ws.add(w)
		all, resps = append(all, w), append(resps, resp)
	}
	other, otherResp := query(8, "a.example.")
	ws.add(other)
	check := func(step string, live map[*waiter]bool) {
		t.Helper()
		for i, w := range all {
			got := ws.match(resps[i])
			if live[w] && got != w || !live[w] && got != nil {
				t.Errorf("%s: answer %d matched %p, want %p (live %v)", step, i, got, w, live[w])
			}
		}
		if ws.match(otherResp) != other {
			t.Errorf("%s: the other ID's waiter is lost", step)
		}
	}
	live := map[*waiter]bool{all[0]: true, all[1]: true, all[2]: true, all[3]: true}
	check("all added", live)
	for _, i := range []int{2, 3, 0} { // middle, head (added last is first), tail
		ws.remove(all[i])
		delete(live, all[i])
		check("removed", live)
	}
	ws.remove(all[2]) // not waiting any more: nothing happens
	check("removed twice", live)
	ws.keepOnly(func(w *waiter) bool { return w == other })
	check("filtered", map[*waiter]bool{})
	if _, ok := ws[7]; ok || len(ws) != 1 {
		t.Errorf("map holds %v, want only ID 8", ws)
	}
}
