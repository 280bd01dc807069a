// Package repairtest has a recording fake of repair.Pods, for tests of
// the repair policy without an API server.
package repairtest

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-mesh/skiff/pkg/cni/repair"
)

// Call is one recorded call: Op is "delete", "label" or "event"; Pod is
// namespace/name; Arg is the label (key=value) or the event's reason.
type Call struct {
	Op, Pod, Arg string
}

// Recorder records the calls made to it and answers with Err (nil: success).
type Recorder struct {
	mu    sync.Mutex
	calls []Call
	// Err, when set, is returned by Delete and Label.
	Err error
}

var _ repair.Pods = (*Recorder)(nil)

func (r *Recorder) add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// Calls returns the calls so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Delete records a deletion.
func (r *Recorder) Delete(_ context.Context, pod *corev1.Pod) error {
	r.add(Call{"delete", pod.Namespace + "/" + pod.Name, ""})
	return r.Err
}

// Label records a label.
func (r *Recorder) Label(_ context.Context, pod *corev1.Pod, key, value string) error {
	r.add(Call{"label", pod.Namespace + "/" + pod.Name, key + "=" + value})
	return r.Err
}

// Event records an event.
func (r *Recorder) Event(_ context.Context, pod *corev1.Pod, reason, _ string) error {
	r.add(Call{"event", pod.Namespace + "/" + pod.Name, reason})
	return nil
}
