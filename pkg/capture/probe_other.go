//go:build !linux

package capture

import (
	"context"
	"errors"
	"time"
)

// Probe proves that capture works; it needs Linux.
func Probe(ctx context.Context, p *Policy, probePort uint16, timeout time.Duration) error {
	return errors.New("validation: the probe needs Linux")
}
