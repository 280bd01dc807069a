package dnsproxy

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelperProxy())
	}
	goleak.VerifyTestMain(m)
}
