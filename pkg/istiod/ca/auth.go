package ca

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// Authenticator proves a caller's identity from a gRPC call's context (its
// metadata and its TLS peer). Implementations must be safe for concurrent use.
type Authenticator interface {
	// Name names the authenticator in logs and errors.
	Name() string
	// Authenticate returns the identity the caller proved. It returns an
	// error wrapping ErrNoCredential when the call carries no credential of
	// its kind, and another error saying why a credential was refused.
	Authenticate(ctx context.Context) (spiffe.ID, error)
}

// ErrNoCredential means a call carries no credential an authenticator checks.
var ErrNoCredential = errors.New("no credential")

// The CertAuthenticator's refusals when there is no certificate, made once:
// every token-authenticated call meets one.
var (
	errNoPeer       = fmt.Errorf("%w: no peer", ErrNoCredential)
	errNoClientCert = fmt.Errorf("%w: no client certificate", ErrNoCredential)
)

// AuthError is returned when no authenticator accepts a call.
type AuthError struct {
	// Reasons holds the refusals, "name: reason": those of credentials
	// that were presented, or when none was, why each authenticator found
	// nothing.
	Reasons []string
}

// Error implements error.
func (e *AuthError) Error() string {
	if len(e.Reasons) == 0 {
		return "authentication failed: no authenticator configured"
	}
	return "authentication failed: " + strings.Join(e.Reasons, "; ")
}

// Authenticate tries each authenticator in turn and returns the first
// identity proved, with the name of the authenticator that proved it, or an
// *AuthError listing every refusal.
func Authenticate(ctx context.Context, auths []Authenticator) (spiffe.ID, string, error) {
	// The refusals are formatted only if no authenticator accepts: a
	// token call first passes the certificate authenticator, which finds
	// no certificate.
	type failure struct {
		name string
		err  error
	}
	var buf [4]failure
	failures := buf[:0]
	for _, a := range auths {
		id, err := a.Authenticate(ctx)
		if err == nil {
			return id, a.Name(), nil
		}
		failures = append(failures, failure{a.Name(), err})
	}
	var refused, absent []string
	for _, f := range failures {
		if errors.Is(f.err, ErrNoCredential) {
			absent = append(absent, f.name+": "+f.err.Error())
		} else {
			refused = append(refused, f.name+": "+f.err.Error())
		}
	}
	// A refused credential explains more than the absence of others.
	if len(refused) == 0 {
		refused = absent
	}
	return spiffe.ID{}, "", &AuthError{Reasons: refused}
}

// BearerToken returns the token of the call's "authorization: Bearer ..."
// metadata, or an error wrapping ErrNoCredential.
func BearerToken(ctx context.Context) (string, error) {
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		scheme, tok, ok := strings.Cut(v, " ")
		if ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) != "" {
			return strings.TrimSpace(tok), nil
		}
	}
	return "", fmt.Errorf("%w: no bearer token in the authorization metadata", ErrNoCredential)
}

// CertAuthenticator accepts callers presenting, over mTLS, a workload
// certificate that verifies against the CA's current roots at the time of
// the call and carries one SPIFFE ID of the trust domain: the renewal path.
type CertAuthenticator struct {
	// Roots returns the trusted roots (e.g. (*CA).Roots).
	Roots func() *pki.Bundle
	// TrustDomain is the only trust domain accepted.
	TrustDomain string
	// Now returns the current time (time.Now).
	Now func() time.Time
}

var _ Authenticator = (*CertAuthenticator)(nil)

// NewCertAuthenticator returns a CertAuthenticator for the CA's roots and trust domain.
func NewCertAuthenticator(c *CA) *CertAuthenticator {
	return &CertAuthenticator{Roots: c.Roots, TrustDomain: c.TrustDomain(), Now: c.cfg.Now}
}

// Name implements Authenticator.
func (a *CertAuthenticator) Name() string { return "client certificate" }

// Authenticate implements Authenticator.
func (a *CertAuthenticator) Authenticate(ctx context.Context) (spiffe.ID, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return spiffe.ID{}, errNoPeer
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return spiffe.ID{}, errNoClientCert
	}
	return a.Verify(info.State.PeerCertificates)
}

// Verify checks a presented chain (leaf first) and returns its identity.
func (a *CertAuthenticator) Verify(chain []*x509.Certificate) (spiffe.ID, error) {
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	if _, err := a.Roots().Verify(chain, now, x509.ExtKeyUsageClientAuth); err != nil {
		return spiffe.ID{}, err
	}
	leaf := chain[0]
	if len(leaf.URIs) != 1 {
		return spiffe.ID{}, fmt.Errorf("client certificate has %d URI SANs, want one SPIFFE ID", len(leaf.URIs))
	}
	id, err := spiffe.FromURL(leaf.URIs[0])
	if err != nil {
		return spiffe.ID{}, fmt.Errorf("client certificate: %w", err)
	}
	if id.TrustDomain != a.TrustDomain {
		return spiffe.ID{}, fmt.Errorf("client certificate identity %s is not in trust domain %q", id, a.TrustDomain)
	}
	return id, nil
}

// serviceAccountUser parses a Kubernetes service account user name,
// system:serviceaccount:<namespace>:<name>.
func serviceAccountUser(trustDomain, user string) (spiffe.ID, error) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return spiffe.ID{}, fmt.Errorf("user %q is not a service account", user)
	}
	ns, sa, ok := strings.Cut(rest, ":")
	if !ok {
		return spiffe.ID{}, fmt.Errorf("user %q is not a service account", user)
	}
	return spiffe.New(trustDomain, ns, sa)
}
