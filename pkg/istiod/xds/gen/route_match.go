package gen

import (
	"maps"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
)

// routeMatch converts an Istio match (nil: everything) as Istio 1.31 does:
// headers and withoutHeaders sorted by name (JWT claims, named
// @request.auth.claims, matched in the JWT filter's metadata instead),
// the path, its case, then the method, authority and scheme as pseudo
// headers, and query parameters by name. A match of "*" as a regex, or
// of nothing, asks only that the header be present.
func routeMatch(m *apinet.HTTPMatchRequest) *routev3.RouteMatch {
	rm := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	if m == nil {
		return rm
	}
	for _, without := range []bool{false, true} {
		hs := m.GetHeaders()
		if without {
			hs = m.GetWithoutHeaders()
		}
		for _, name := range slices.Sorted(maps.Keys(hs)) {
			if claims, ok := routingClaim(name); ok {
				mm := claimMetadata(claims, stringMatcher(hs[name]))
				mm.Invert = without
				rm.DynamicMetadata = append(rm.DynamicMetadata, mm)
				continue
			}
			h := headerMatcher(strings.ToLower(name), hs[name])
			if without {
				h.InvertMatch = true
				h.TreatMissingHeaderAsEmpty = !presentOnly(hs[name])
			}
			rm.Headers = append(rm.Headers, h)
		}
	}
	slices.SortStableFunc(rm.Headers, func(a, b *routev3.HeaderMatcher) int { return strings.Compare(a.Name, b.Name) })
	switch u := m.GetUri().GetMatchType().(type) {
	case *apinet.StringMatch_Exact:
		rm.PathSpecifier = &routev3.RouteMatch_Path{Path: u.Exact}
	case *apinet.StringMatch_Prefix:
		rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: u.Prefix}
	case *apinet.StringMatch_Regex:
		rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: u.Regex}}
	}
	rm.CaseSensitive = wrapperspb.Bool(!m.GetIgnoreUriCase())
	for _, pseudo := range []struct {
		name string
		m    *apinet.StringMatch
	}{{":method", m.GetMethod()}, {":authority", m.GetAuthority()}, {":scheme", m.GetScheme()}} {
		if pseudo.m != nil {
			rm.Headers = append(rm.Headers, headerMatcher(pseudo.name, pseudo.m))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.GetQueryParams())) {
		q := &routev3.QueryParameterMatcher{Name: name}
		if sm := m.GetQueryParams()[name]; presentOnly(sm) {
			q.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		} else if em := stringMatcher(sm); em != nil {
			q.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: em}
		}
		rm.QueryParameters = append(rm.QueryParameters, q)
	}
	return rm
}

// headerMatcher matches header name against s.
func headerMatcher(name string, s *apinet.StringMatch) *routev3.HeaderMatcher {
	h := &routev3.HeaderMatcher{Name: name}
	if presentOnly(s) {
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
	} else if em := stringMatcher(s); em != nil {
		h.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: em}
	}
	return h
}

// presentOnly reports whether s asks only for presence: no match, or the
// regex "*" (not RE2: Istio's catch-all).
func presentOnly(s *apinet.StringMatch) bool {
	if s.GetMatchType() == nil {
		return true
	}
	r, ok := s.GetMatchType().(*apinet.StringMatch_Regex)
	return ok && r.Regex == "*"
}

func stringMatcher(s *apinet.StringMatch) *matcherv3.StringMatcher {
	switch v := s.GetMatchType().(type) {
	case *apinet.StringMatch_Exact:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v.Exact}}
	case *apinet.StringMatch_Prefix:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: v.Prefix}}
	case *apinet.StringMatch_Regex:
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: v.Regex}}}
	}
	return nil
}

// routingClaim parses a header name that names a JWT claim, as
// "@request.auth.claims.a.b" or "@request.auth.claims[a][b]", into the
// claim's path.
func routingClaim(name string) ([]string, bool) {
	const prefix = "@request.auth.claims"
	if len(name) < len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) {
		return nil, false
	}
	rest := name[len(prefix):]
	switch {
	case len(rest) > 1 && rest[0] == '.':
		return strings.Split(rest[1:], "."), true
	case len(rest) > 2 && rest[0] == '[' && rest[len(rest)-1] == ']':
		return strings.Split(rest[1:len(rest)-1], "]["), true
	}
	return nil, false
}

// claimMetadata matches a claim path in the JWT filter's payload against
// m, as one element of a list or as a string, in Istio's order.
func claimMetadata(path []string, m *matcherv3.StringMatcher) *matcherv3.MetadataMatcher {
	str := &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: m}}
	list := &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{
		MatchPattern: &matcherv3.ListMatcher_OneOf{OneOf: str}}}}
	return &matcherv3.MetadataMatcher{Filter: jwtFilterName, Path: payloadPath(path),
		Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{
			ValueMatchers: []*matcherv3.ValueMatcher{list, str}}}}}
}
