package ca

import (
	"context"
	"fmt"
	"slices"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// DefaultAudience is the audience of tokens sent to the CA.
const DefaultAudience = "istio-ca"

// TokenReviewAuthenticator accepts a Kubernetes service-account token
// (bearer metadata) that the API server's TokenReview authenticates for one
// of Audiences; the identity is the token's service account.
type TokenReviewAuthenticator struct {
	// Client is a REST client of authentication.k8s.io/v1 (a clientset's
	// AuthenticationV1().RESTClient(), say) for the TokenReview API; its
	// user needs the system:auth-delegator role (create tokenreviews).
	Client rest.Interface
	// Audiences are the accepted audiences (istio-ca).
	Audiences []string
	// TrustDomain is the trust domain of the identities returned.
	TrustDomain string
	// Timeout bounds each review (5s).
	Timeout time.Duration
}

var _ Authenticator = (*TokenReviewAuthenticator)(nil)

// NewTokenReviewAuthenticator returns an authenticator for tokens with
// audience istio-ca in the given trust domain.
func NewTokenReviewAuthenticator(client rest.Interface, trustDomain string) *TokenReviewAuthenticator {
	return &TokenReviewAuthenticator{Client: client, Audiences: []string{DefaultAudience}, TrustDomain: trustDomain}
}

// Name implements Authenticator.
func (a *TokenReviewAuthenticator) Name() string { return "kubernetes token" }

// Authenticate implements Authenticator.
func (a *TokenReviewAuthenticator) Authenticate(ctx context.Context) (spiffe.ID, error) {
	tok, err := BearerToken(ctx)
	if err != nil {
		return spiffe.ID{}, err
	}
	return a.Review(ctx, tok)
}

// Review asks the API server about a token and returns its identity.
func (a *TokenReviewAuthenticator) Review(ctx context.Context, token string) (spiffe.ID, error) {
	timeout := a.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	auds := a.Audiences
	if len(auds) == 0 {
		auds = []string{DefaultAudience}
	}
	var tr authv1.TokenReview
	err := a.Client.Post().Resource("tokenreviews").
		Body(&authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token, Audiences: auds}}).
		Do(ctx).Into(&tr)
	if err != nil {
		return spiffe.ID{}, fmt.Errorf("token review: %w", err)
	}
	st := tr.Status
	if st.Error != "" {
		return spiffe.ID{}, fmt.Errorf("token refused: %s", st.Error)
	}
	if !st.Authenticated {
		return spiffe.ID{}, fmt.Errorf("token not authenticated")
	}
	if !slices.ContainsFunc(st.Audiences, func(s string) bool { return slices.Contains(auds, s) }) {
		return spiffe.ID{}, fmt.Errorf("token audiences %v do not include %v", st.Audiences, auds)
	}
	id, err := serviceAccountUser(a.TrustDomain, st.User.Username)
	if err != nil {
		return spiffe.ID{}, fmt.Errorf("token: %w", err)
	}
	return id, nil
}
