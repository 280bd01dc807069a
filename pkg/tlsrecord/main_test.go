package tlsrecord_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a gRPC
// server or client, a writer).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
