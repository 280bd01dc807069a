// Package model is istiod's view of the mesh: the objects registries hand
// over (Inputs), the services and endpoints derived from them, and the
// immutable PushContext that generators read for one push.
package model
