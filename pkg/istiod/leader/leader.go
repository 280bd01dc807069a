// Package leader elects one istiod replica to run each cluster-wide
// singleton (publishing the root certificate ConfigMaps, patching the
// webhook configurations), with a coordination.k8s.io Lease per singleton
// in istiod's namespace, as Istio does. Every replica keeps serving xDS,
// the CA and the webhooks; only the singletons' writes are elected. In
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
	// ValidationController, suffixed with "-" and the revision (see
	// PerRevision), is the lease of the webhook configuration patcher: the
	// caBundle of the revision's injection and validation webhooks and
	// validation's failurePolicy. Istio's validation controller used this
	// name when it patched under election; Istio 1.31 patches from every
	// replica instead.
	ValidationController = "istio-validation-controller-election"
)

// PerRevision returns the lease name of a singleton that each revision
// runs for its own objects: name-revision ("default" when revision is
// empty), as Istio names its per-revision elections.
func PerRevision(name, revision string) string {
	if revision == "" {
		revision = "default"
	}
	return name + "-" + revision
}

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
