package gen

import (
	"fmt"
	"strings"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// Request principals and JWT claims are read from the payload the JWT
// filter (see jwtFilter) writes into its dynamic metadata. Istio reads
// them from its own authn filter's metadata, which upstream Envoy does
// not have; the payload holds the same claims. grpc-go matches no
// metadata: on proxyless servers such a condition never matches.

// claimMatcher matches claim path (under the payload) against a value, as
// a string or as one element of a list (audiences, space-delimited claims).
func claimMatcher(path []string, m *matcherv3.StringMatcher) *rbacv3.Principal {
	str := &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: m}}
	value := &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{ValueMatchers: []*matcherv3.ValueMatcher{
		str, {MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{MatchPattern: &matcherv3.ListMatcher_OneOf{OneOf: str}}}},
	}}}}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{
		Filter: jwtFilterName, Path: payloadPath(path), Value: value}}}
}

// payloadPath is the metadata path of a claim path in the JWT filter's
// payload.
func payloadPath(path []string) []*matcherv3.MetadataMatcher_PathSegment {
	segs := make([]*matcherv3.MetadataMatcher_PathSegment, 0, 1+len(path))
	for _, k := range append([]string{"payload"}, path...) {
		segs = append(segs, &matcherv3.MetadataMatcher_PathSegment{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: k}})
	}
	return segs
}

func anyValue() *matcherv3.StringMatcher { return regex(".+") }

// requestPrincipal matches "ISS/SUB" (split at the last "/"), with "*"
// for any and a leading or trailing "*" for a suffix or prefix.
func requestPrincipal(v string, tcp bool) (*rbacv3.Principal, error) {
	if tcp {
		return nil, errHTTPOnly
	}
	iss, sub, found := v, "", false
	if i := strings.LastIndex(v, "/"); i >= 0 {
		iss, sub, found = v[:i], v[i+1:], true
	}
	var mi, ms *matcherv3.StringMatcher
	switch {
	case v == "*":
		mi, ms = anyValue(), anyValue()
	case !found:
		mi, ms = stringMatch(v, "", false), anyValue()
	default:
		mi, ms = stringMatch(iss, "", false), stringMatch(sub, "", false)
		if iss == "*" {
			mi = anyValue()
		}
		if sub == "*" {
			ms = anyValue()
		}
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{
		claimMatcher([]string{"iss"}, mi), claimMatcher([]string{"sub"}, ms),
	}}}}, nil
}

// claim matches one claim (a path of names) against a value.
func claim(path ...string) func(string, bool) (*rbacv3.Principal, error) {
	return func(v string, tcp bool) (*rbacv3.Principal, error) {
		if tcp {
			return nil, errHTTPOnly
		}
		return claimMatcher(path, stringMatch(v, "", false)), nil
	}
}

// claimPath parses "[a][b]" into a, b.
func claimPath(s string) ([]string, error) {
	var out []string
	for s != "" {
		end := strings.IndexByte(s, ']')
		name, ok := "", false
		if end > 0 {
			name, ok = bracketed(s[:end+1])
		}
		if !ok || name == "" {
			return nil, fmt.Errorf("want [NAME] or [NAME][NAME]...")
		}
		out = append(out, name)
		s = s[end+1:]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("want [NAME]")
	}
	return out, nil
}
