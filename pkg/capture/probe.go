package capture

import "errors"

// ErrValidation means the probe found that traffic is not captured.
// istio-iptables exits with code 126 on it, as Istio's does.
var ErrValidation = errors.New("traffic capture validation failed")
