package routes_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that istiod, the backends and the xDS clients the tests
// start are all gone when they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
