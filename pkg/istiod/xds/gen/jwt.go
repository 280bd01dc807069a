package gen

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	security "istio.io/client-go/pkg/apis/security/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// jwtFilterName is Envoy's JWT authentication filter.
const jwtFilterName = "envoy.filters.http.jwt_authn"

// jwtFilter is the JWT filter of an Envoy sidecar's inbound HTTP chains
// for the RequestAuthentications selecting its workload, nil without any.
// As in Istio every rule is a provider "origins-I"; a request passes with
// no token, or with a token valid for one of them (an invalid token is
// refused with 401); AuthorizationPolicy decides about missing tokens.
// Keys come from the rule's inline jwks, else from its jwksUri through the
// outbound cluster of the URI's host and port (Istio's default has istiod
// fetch the keys and inline them; Skiff lets Envoy fetch them).
func jwtFilter(policies []*security.RequestAuthentication) *hcmv3.HttpFilter {
	cfg := &jwtv3.JwtAuthentication{Providers: map[string]*jwtv3.JwtProvider{}, BypassCorsPreflight: true}
	var and, or []*jwtv3.JwtRequirement
	i := 0
	for _, ra := range policies {
		for _, r := range ra.Spec.GetJwtRules() {
			p := &jwtv3.JwtProvider{
				Issuer:               r.GetIssuer(),
				Audiences:            r.GetAudiences(),
				Forward:              r.GetForwardOriginalToken(),
				ForwardPayloadHeader: r.GetOutputPayloadToHeader(),
				PayloadInMetadata:    "payload",
				FromParams:           r.GetFromParams(),
				FromCookies:          r.GetFromCookies(),
				NormalizePayloadInMetadata: &jwtv3.JwtProvider_NormalizePayload{
					SpaceDelimitedClaims: spaceDelimited(r.GetSpaceDelimitedClaims()),
				},
			}
			for _, h := range r.GetFromHeaders() {
				p.FromHeaders = append(p.FromHeaders, &jwtv3.JwtHeader{Name: h.GetName(), ValuePrefix: h.GetPrefix()})
			}
			for _, c := range r.GetOutputClaimToHeaders() {
				p.ClaimToHeaders = append(p.ClaimToHeaders, &jwtv3.JwtClaimToHeader{HeaderName: c.GetHeader(), ClaimName: c.GetClaim()})
			}
			timeout := r.GetTimeout()
			if timeout == nil {
				timeout = durationpb.New(5e9)
			}
			switch {
			case r.GetJwks() != "":
				p.JwksSourceSpecifier = &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{
					Specifier: &corev3.DataSource_InlineString{InlineString: r.GetJwks()}}}
			case r.GetJwksUri() != "":
				cluster, err := jwksCluster(r.GetJwksUri())
				if err != nil {
					reportOnce("RequestAuthentication jwksUri cannot be fetched: tokens of this issuer are refused",
						"policy", ra.Namespace+"/"+ra.Name, "issuer", r.GetIssuer(), "err", err)
				}
				p.JwksSourceSpecifier = &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{
					HttpUri:       &corev3.HttpUri{Uri: r.GetJwksUri(), HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: cluster}, Timeout: timeout},
					CacheDuration: durationpb.New(5 * 60e9),
				}}
			default:
				reportOnce("RequestAuthentication rule has neither jwks nor jwksUri: tokens of this issuer are refused",
					"policy", ra.Namespace+"/"+ra.Name, "issuer", r.GetIssuer())
				p.JwksSourceSpecifier = &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{
					Specifier: &corev3.DataSource_InlineString{InlineString: `{"keys":[]}`}}}
			}
			name := fmt.Sprintf("origins-%d", i)
			i++
			cfg.Providers[name] = p
			byName := &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: name}}
			and = append(and, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{
				Requirements: []*jwtv3.JwtRequirement{byName, {RequiresType: &jwtv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}}},
			}}})
			or = append(or, byName)
		}
	}
	if i == 0 {
		return nil
	}
	req := and[0]
	if len(and) > 1 {
		or = append(or, &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAll{RequiresAll: &jwtv3.JwtRequirementAndList{Requirements: and}}})
		req = &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{RequiresAny: &jwtv3.JwtRequirementOrList{Requirements: or}}}
	}
	cfg.Rules = []*jwtv3.RequirementRule{{
		Match:           &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		RequirementType: &jwtv3.RequirementRule_Requires{Requires: req},
	}}
	return &hcmv3.HttpFilter{Name: jwtFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(cfg)}}
}

// spaceDelimited are the claims whose space-separated values are lists
// (Istio's defaults plus the rule's own).
func spaceDelimited(extra []string) []string {
	out := []string{"permission", "scope"}
	for _, c := range extra {
		if c != "permission" && c != "scope" {
			out = append(out, c)
		}
	}
	return out
}

// jwksCluster is the outbound cluster of a JWKS URI's host and port
// (443 for https, 80 for http).
func jwksCluster(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("jwksUri %q: %w", uri, err)
	}
	port := uint64(80)
	if u.Scheme == "https" {
		port = 443
	}
	host := u.Hostname()
	if _, p, err := net.SplitHostPort(u.Host); err == nil && p != "" {
		if port, err = strconv.ParseUint(p, 10, 16); err != nil {
			return "", fmt.Errorf("jwksUri %q: port %q: %w", uri, p, err)
		}
	}
	if host == "" {
		return "", fmt.Errorf("jwksUri %q: no host", uri)
	}
	return model.ClusterName(uint16(port), "", host), nil
}
