// Package spiffe parses and formats the SPIFFE identities Istio gives
// Kubernetes workloads: spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>.
//
// Parsing is strict: the scheme, the trust domain's characters, the path's
// shape and each segment are checked, and an error names the part that is
// wrong, so a certificate authority can refuse a bad identity with a reason.
package spiffe

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Scheme is the URI scheme of SPIFFE IDs.
const Scheme = "spiffe"

// DefaultTrustDomain is Istio's default trust domain.
const DefaultTrustDomain = "cluster.local"

// MaxLength is the longest SPIFFE ID accepted, in bytes (the SPIFFE spec's limit).
const MaxLength = 2048

// maxTrustDomain is the longest trust domain accepted (a DNS name's limit).
const maxTrustDomain = 255

// ErrInvalid is wrapped by every error Parse, New and Validate return.
var ErrInvalid = errors.New("invalid SPIFFE ID")

// Error is the error returned for an ID that cannot be parsed.
type Error struct {
	// Input is the text that was parsed (cut to 256 bytes).
	Input string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("invalid SPIFFE ID %q: %s", e.Input, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

func invalid(input, format string, args ...any) error {
	if len(input) > 256 {
		input = input[:256] + "..."
	}
	return &Error{Input: input, Reason: fmt.Sprintf(format, args...)}
}

// ID is a Kubernetes workload identity.
type ID struct {
	// TrustDomain is the mesh's trust domain, e.g. cluster.local.
	TrustDomain string
	// Namespace is the workload's Kubernetes namespace.
	Namespace string
	// ServiceAccount is the workload's service account name.
	ServiceAccount string
}

// New returns the ID for a trust domain, namespace and service account, or an
// error if any part is not allowed in a SPIFFE ID.
func New(trustDomain, namespace, serviceAccount string) (ID, error) {
	id := ID{TrustDomain: trustDomain, Namespace: namespace, ServiceAccount: serviceAccount}
	if err := id.Validate(); err != nil {
		return ID{}, err
	}
	return id, nil
}

// Validate reports whether every part of the ID is well formed.
func (id ID) Validate() error {
	s := id.String()
	if err := ValidateTrustDomain(id.TrustDomain); err != nil {
		return invalid(s, "%v", err)
	}
	if err := validateSegment("namespace", id.Namespace); err != nil {
		return invalid(s, "%v", err)
	}
	if err := validateSegment("service account", id.ServiceAccount); err != nil {
		return invalid(s, "%v", err)
	}
	if len(s) > MaxLength {
		return invalid(s, "longer than %d bytes", MaxLength)
	}
	return nil
}

// String formats the ID as spiffe://<trust-domain>/ns/<ns>/sa/<sa>.
func (id ID) String() string {
	return Scheme + "://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// URL returns the ID as a URL, the form a certificate's URI SAN takes.
func (id ID) URL() *url.URL {
	return &url.URL{Scheme: Scheme, Host: id.TrustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}
}

// IsZero reports whether the ID is empty.
func (id ID) IsZero() bool { return id == ID{} }

// Parse parses spiffe://<trust-domain>/ns/<ns>/sa/<sa>.
func Parse(s string) (ID, error) {
	if s == "" {
		return ID{}, invalid(s, "empty")
	}
	if len(s) > MaxLength {
		return ID{}, invalid(s, "longer than %d bytes", MaxLength)
	}
	rest, ok := strings.CutPrefix(s, Scheme+"://")
	if !ok {
		if i := strings.Index(s, "://"); i > 0 {
			return ID{}, invalid(s, "scheme %q is not %q", s[:i], Scheme)
		}
		return ID{}, invalid(s, "does not start with %s://", Scheme)
	}
	if strings.ContainsAny(rest, "?#") {
		return ID{}, invalid(s, "query and fragment are not allowed")
	}
	td, path, _ := strings.Cut(rest, "/")
	if err := ValidateTrustDomain(td); err != nil {
		return ID{}, invalid(s, "%v", err)
	}
	parts := strings.Split(path, "/")
	if len(parts) != 4 || parts[0] != "ns" || parts[2] != "sa" {
		return ID{}, invalid(s, "path %q is not /ns/<namespace>/sa/<service-account>", "/"+path)
	}
	id := ID{TrustDomain: td, Namespace: parts[1], ServiceAccount: parts[3]}
	if err := validateSegment("namespace", id.Namespace); err != nil {
		return ID{}, invalid(s, "%v", err)
	}
	if err := validateSegment("service account", id.ServiceAccount); err != nil {
		return ID{}, invalid(s, "%v", err)
	}
	return id, nil
}

// FromURL converts a certificate's URI SAN to an ID.
func FromURL(u *url.URL) (ID, error) {
	if u == nil {
		return ID{}, invalid("", "nil URL")
	}
	return Parse(u.String())
}

// ValidateTrustDomain checks a trust domain: 1 to 255 bytes of lowercase
// letters, digits, '.', '-' and '_' (the SPIFFE spec's set; no port, no
// user info, no upper case).
func ValidateTrustDomain(td string) error {
	if td == "" {
		return errors.New("trust domain is empty")
	}
	if len(td) > maxTrustDomain {
		return fmt.Errorf("trust domain is longer than %d bytes", maxTrustDomain)
	}
	for i := 0; i < len(td); i++ {
		c := td[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			return fmt.Errorf("trust domain %q has character %q at %d (allowed: a-z 0-9 . - _)", td, c, i)
		}
	}
	return nil
}

// validateSegment checks a path segment: non-empty, not "." or "..", made of
// the SPIFFE spec's path characters (letters, digits, '.', '-', '_').
func validateSegment(what, seg string) error {
	switch seg {
	case "":
		return fmt.Errorf("%s is empty", what)
	case ".", "..":
		return fmt.Errorf("%s %q is a relative path segment", what, seg)
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			return fmt.Errorf("%s %q has character %q at %d (allowed: A-Z a-z 0-9 . - _)", what, seg, c, i)
		}
	}
	return nil
}
