// Package analysis finds configuration that istiod accepts but does not
// fully act on, and references to objects that do not exist, and reports
// each as a typed Message (code, level, resource, field path, text) in the
// shape of Istio's analysis messages ("Error [IST0101] (VirtualService
// default/reviews) Referenced host not found: \"ratings\"").
//
// Nothing istiod reads is dropped silently: every field or kind that the
// generators do not translate for a proxy type is listed in a support
// table (Untranslated, plain data) and yields a message for each object
// that sets it, per proxy type present among the workloads it applies to
// (Envoy sidecars, proxyless gRPC). Kinds istiod does not read at all get
// one message per object.
//
// The same messages are shown by the validating webhook (as admission
// warnings), logged once by istiod (Reporter), listed on its debug
// endpoint, and printed by istioctl analyze.
package analysis
