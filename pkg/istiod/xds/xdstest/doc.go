// Package xdstest helps test xDS servers: deep validation of resources
// (ValidateAll recursing into Any fields), reference checks between resource
// types, and small state-of-the-world and delta ADS clients that expose
// every message for assertions.
package xdstest
