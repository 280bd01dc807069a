package leader

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultLeaseDuration is Istio's lease duration (its election TTL); the
// renew deadline is half of it and the retry period a quarter, as Istio's.
const DefaultLeaseDuration = 30 * time.Second

// Config is how this replica takes part in the elections.
type Config struct {
	// Enabled turns the elections on (ENABLE_LEADER_ELECTION, default
	// true); off, every replica runs every singleton, as Istio does.
	Enabled bool
	// Namespace holds the Leases: istiod's namespace (POD_NAMESPACE).
	Namespace string
	// Identity is this replica's holderIdentity (POD_NAME; Istio falls back
	// to "unknown-" and the host name).
	Identity string
	// LeaseDuration is how long a lease lasts unrenewed: how long a crashed
	// leader's singletons wait for a successor.
	LeaseDuration time.Duration
}

// RenewDeadline is how long the leader retries renewing before it gives up
// the singletons: half the lease duration.
func (c Config) RenewDeadline() time.Duration { return c.LeaseDuration / 2 }

// RetryPeriod is how often candidates try to take the lease: a quarter of
// the lease duration.
func (c Config) RetryPeriod() time.Duration { return c.LeaseDuration / 4 }

// LeaseDurationEnv names the variable that overrides DefaultLeaseDuration.
// It is Skiff's (Istio's TTL is fixed); tests and small clusters shorten it
// so that a successor takes over sooner after a crash.
const LeaseDurationEnv = "SKIFF_LEADER_ELECTION_LEASE_DURATION"

// ConfigFromEnv reads ENABLE_LEADER_ELECTION, POD_NAMESPACE (else
// namespace, the --namespace flag), POD_NAME and LeaseDurationEnv with
// lookup (os.LookupEnv). Errors name the variable and its value.
func ConfigFromEnv(lookup func(string) (string, bool), namespace string) (Config, error) {
	c := Config{Enabled: true, Namespace: namespace, LeaseDuration: DefaultLeaseDuration}
	var errs []error
	if v, ok := lookup("ENABLE_LEADER_ELECTION"); ok && v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("ENABLE_LEADER_ELECTION=%q: not a boolean", v))
		}
		c.Enabled = b
	}
	if v, ok := lookup("POD_NAMESPACE"); ok && v != "" {
		c.Namespace = v
	}
	if v, ok := lookup("POD_NAME"); ok && v != "" {
		c.Identity = v
	} else {
		host, _ := os.Hostname()
		c.Identity = "unknown-" + host
	}
	if v, ok := lookup(LeaseDurationEnv); ok && v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q: %w", LeaseDurationEnv, v, err))
		case d < 2*time.Second:
			errs = append(errs, fmt.Errorf("%s=%q: must be at least 2s", LeaseDurationEnv, v))
		default:
			c.LeaseDuration = d
		}
	}
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("POD_NAMESPACE=%q: not a namespace name: %v", c.Namespace, msgs))
	}
	return c, errors.Join(errs...)
}
