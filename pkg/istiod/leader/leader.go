// Package leader elects one istiod replica to run each cluster-wide
// singleton (publishing the root certificate ConfigMaps), with a
// coordination.k8s.io Lease per singleton in istiod's namespace, as Istio
// does. Every replica keeps serving xDS, the CA and the webhooks, and
// patches the webhook configurations; only the singletons' writes are
// elected. In
// file mode, or with ENABLE_LEADER_ELECTION=false, Always makes the process
// its own leader.
package leader

import (
	"context"
)

// Lease names, Istio's where Istio has one.
const (
	// NamespaceController is the lease of the controller that publishes the
	// istio-ca-root-cert ConfigMap into every namespace (Istio's namespace
	// controller election).
	NamespaceController = "istio-namespace-controller-election"
)

// Elector runs singletons while this process holds their lease.
type Elector interface {
	// Go campaigns for the lease name in the background until ctx ends.
	// Each time this process becomes the leader it calls fn with a context
	// that ends when leadership ends (lost, or ctx ended); fn must stop
	// writing and return then, and the campaign does not resume until it
	// has. When fn returns while still leading, the lease is given up and
	// the campaign resumes.
	Go(ctx context.Context, name string, fn func(ctx context.Context))
	// Wait returns once the campaigns Go started have ended (ctx ended, fn
	// returned, the lease released), so that a stopping process exits
	// after handing over.
	Wait()
}

// Always is the Elector of a process that is the only one (file mode, or
// leader election turned off): fn runs at once, for as long as ctx.
type Always struct{}

var _ Elector = Always{}

// Go runs fn(ctx) in a goroutine.
func (Always) Go(ctx context.Context, _ string, fn func(ctx context.Context)) { go fn(ctx) }

// Wait returns at once: Always holds no lease to hand over.
func (Always) Wait() {}

// Or returns e, or Always when e is nil.
func Or(e Elector) Elector {
	if e == nil {
		return Always{}
	}
	return e
}
