// Package routes holds end-to-end tests of VirtualService traffic policy:
// istiod serves a test-written mesh, and grpc-go's own xDS client makes
// real RPCs to loopback backends through the routes istiod generates.
package routes
