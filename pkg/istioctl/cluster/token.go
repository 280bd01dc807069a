package cluster

import (
	"context"
	"fmt"
	"time"

	authv1 "k8s.io/api/authentication/v1"
)

// IstioCAAudience is the audience of the tokens istiod accepts (Istio's
// istioctl asks for it too).
const IstioCAAudience = "istio-ca"

// Token asks the API server (TokenRequest) for a token of serviceAccount in
// namespace for audiences, valid for ttl: what Istio's istioctl presents
// to istiod, as SA default of istiod's namespace for the istio-ca audience.
func (c *Cluster) Token(ctx context.Context, namespace, serviceAccount string, audiences []string, ttl time.Duration) (string, error) {
	secs := int64(ttl / time.Second)
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &secs}}
	tr := &authv1.TokenRequest{}
	err := c.Clients.Core.Post().Namespace(namespace).Resource("serviceaccounts").Name(serviceAccount).
		SubResource("token").Body(req).Do(ctx).Into(tr)
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s (audiences %v): %w", namespace, serviceAccount, audiences, err)
	}
	return tr.Status.Token, nil
}
