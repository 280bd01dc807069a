// Package registry defines what istiod needs from a source of services and
// configuration; the file and kube subpackages implement it.
package registry

import (
	"context"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// Registry is a source of services, endpoints and Istio configuration.
type Registry interface {
	// Run watches the source until ctx ends, calling changed after every
	// change (from Run's goroutine; changed must not block for long).
	Run(ctx context.Context, changed func()) error
	// Inputs returns the current objects; the result is never mutated.
	Inputs() *model.Inputs
	// Problems lists objects that were rejected, with the reason.
	Problems() []error
	// Synced reports whether the initial state has been read.
	Synced() bool
}
