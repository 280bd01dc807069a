package gen

import (
	"net/http"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	apinet "istio.io/api/networking/v1alpha3"
)

// defaultRetryOn is what Istio retries when nothing says otherwise:
// failures before the upstream answered, and gRPC's unavailable and
// cancelled.
const defaultRetryOn = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"

var (
	// previousHosts steers a retry to another host than those tried.
	previousHosts = []*routev3.RetryPolicy_RetryHostPredicate{{
		Name:       "envoy.retry_host_predicates.previous_hosts",
		ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: mustAny(&previoushostsv3.PreviousHostsPredicate{})},
	}}
	// previousPriorities steers a retry to other priorities (localities).
	previousPriorities = &routev3.RetryPolicy_RetryPriority{
		Name:       "envoy.retry_priorities.previous_priorities",
		ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{TypedConfig: mustAny(&previousprioritiesv3.PreviousPrioritiesConfig{UpdateFrequency: 2})},
	}
	// defaultRetry and defaultHashedRetry are Istio's default policies,
	// shared by every route that takes one: never modify them.
	defaultRetry       = newRetry(false)
	defaultHashedRetry = newRetry(true)
)

// newRetry is Istio's default retry policy: two retries of defaultRetryOn,
// host selection tried up to five times, on another host than those tried
// unless the route hashes requests to one (hashed).
func newRetry(hashed bool) *routev3.RetryPolicy {
	p := &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(2), RetryOn: defaultRetryOn, HostSelectionRetryMaxAttempts: 5}
	if !hashed {
		p.RetryHostPredicate = previousHosts
	}
	return p
}

// retryPolicy is a route's retry policy as Istio 1.31 writes it: the
// route's retries, else the mesh's defaultHttpRetryPolicy, else Istio's
// default (newRetry). Attempts of 0 or less turn retries off (nil).
// Status codes in retryOn become retriable status codes. hashed: the route
// has one destination, which a DestinationRule hashes consistently.
func retryPolicy(in *apinet.HTTPRetry, mesh *meshconfig.MeshConfig, hashed bool) *routev3.RetryPolicy {
	if in == nil {
		in = mesh.GetDefaultHttpRetryPolicy()
	}
	switch {
	case in == nil && hashed:
		return defaultHashedRetry
	case in == nil:
		return defaultRetry
	case in.GetAttempts() <= 0:
		return nil
	}
	p := newRetry(hashed)
	p.NumRetries = wrapperspb.UInt32(uint32(in.GetAttempts()))
	if on := in.GetRetryOn(); on != "" {
		p.RetryOn, p.RetriableStatusCodes = splitRetryOn(on)
		if len(p.RetriableStatusCodes) > 0 && !strings.Contains(p.RetryOn, "retriable-status-codes") {
			p.RetryOn += ",retriable-status-codes"
		}
	}
	if t := in.GetPerTryTimeout(); t != nil {
		p.PerTryTimeout = durationpb.New(t.AsDuration())
	}
	if ip := in.GetRetryIgnorePreviousHosts(); ip != nil {
		p.RetryHostPredicate = nil
		if ip.GetValue() {
			p.RetryHostPredicate = previousHosts
		}
	}
	if in.GetRetryRemoteLocalities().GetValue() {
		p.RetryPriority = previousPriorities
	}
	if b := in.GetBackoff(); b != nil {
		p.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(b.AsDuration())}
	}
	return p
}

// splitRetryOn splits a retryOn list into Envoy's conditions and the HTTP
// status codes among them (numbers that name a status).
func splitRetryOn(on string) (string, []uint32) {
	var conds []string
	var codes []uint32
	for part := range strings.SplitSeq(on, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if n, err := strconv.Atoi(part); err == nil && http.StatusText(n) != "" {
			codes = append(codes, uint32(n))
			continue
		}
		conds = append(conds, part)
	}
	return strings.Join(conds, ","), codes
}
