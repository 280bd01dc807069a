// Package clustertest helps test commands that port-forward: Recorder is a
// recording cluster.Forwarder that answers with a local address the test
// serves, and Kubelet stands in for a node's kubelet behind a real API
// server, so the real forwarder can run end to end.
package clustertest

import (
	"context"
	"fmt"
	"sync"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
)

// Forward is one recorded call.
type Forward struct {
	Namespace, Pod string
	Port           uint16
}

// String renders it as "POD.NS:PORT".
func (f Forward) String() string { return fmt.Sprintf("%s.%s:%d", f.Pod, f.Namespace, f.Port) }

// Recorder is a Forwarder that answers every forward to a pod port with
// Targets[port] and records the calls.
type Recorder struct {
	// Targets maps a pod port to the local address that stands for it.
	Targets map[uint16]string

	mu       sync.Mutex
	forwards []Forward
	open     int
}

var _ cluster.Forwarder = (*Recorder)(nil)

// Forward implements cluster.Forwarder.
func (r *Recorder) Forward(_ context.Context, namespace, name string, port uint16) (string, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forwards = append(r.forwards, Forward{Namespace: namespace, Pod: name, Port: port})
	addr, ok := r.Targets[port]
	if !ok {
		return "", nil, fmt.Errorf("clustertest: no target for port %d", port)
	}
	r.open++
	var once sync.Once
	return addr, func() {
		once.Do(func() {
			r.mu.Lock()
			r.open--
			r.mu.Unlock()
		})
	}, nil
}

// Forwards returns the calls so far.
func (r *Recorder) Forwards() []Forward {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Forward(nil), r.forwards...)
}

// Open returns how many forwards have not been stopped.
func (r *Recorder) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open
}
