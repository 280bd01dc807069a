// Package clusters tests DestinationRule traffic policy on clusters end to
// end: istiod serves a test-written mesh, grpc-go's own xDS client applies
// the clusters it generates, and real RPCs to loopback backends show the
// load balancer, outlier detection and circuit breaker at work.
package clusters
