package gen

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The matchers of single AuthorizationPolicy values, in Istio's forms.

// bracketed returns NAME from "[NAME]".
func bracketed(s string) (string, bool) {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' {
		return "", false
	}
	return s[1 : len(s)-1], true
}

// stringMatch renders Istio's value forms: "*" any non-empty value,
// "*x" a suffix, "x*" a prefix, else exact; prefix is prepended.
func stringMatch(v, prefix string, ignoreCase bool) *matcherv3.StringMatcher {
	switch {
	case v == "*":
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: ".+"}}}
	case strings.HasPrefix(v, "*") && prefix != "":
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{
			Regex: prefix + ".*" + regexp.QuoteMeta(v[1:])}}}
	case strings.HasPrefix(v, "*"):
		return &matcherv3.StringMatcher{IgnoreCase: ignoreCase, MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: v[1:]}}
	case strings.HasSuffix(v, "*"):
		return &matcherv3.StringMatcher{IgnoreCase: ignoreCase, MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: prefix + v[:len(v)-1]}}
	}
	return &matcherv3.StringMatcher{IgnoreCase: ignoreCase, MatchPattern: &matcherv3.StringMatcher_Exact{Exact: prefix + v}}
}

// headerMatch matches a header: "*" means present.
func headerMatch(name, v string, ignoreCase bool) *routev3.HeaderMatcher {
	if v == "*" {
		return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}
	}
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: stringMatch(v, "", ignoreCase)}}
}

func authenticated(m *matcherv3.StringMatcher) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: m}}}
}

func regex(r string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: r}}}
}

// sourcePrincipal matches the peer certificate's URI SAN: a value
// "td/ns/NS/sa/SA" is spiffe://td/ns/NS/sa/SA.
func sourcePrincipal(v string, _ bool) (*rbacv3.Principal, error) {
	return authenticated(stringMatch(v, "spiffe://", false)), nil
}

// sourceNamespace matches identities in a namespace ("*" wildcards).
func sourceNamespace(v string, _ bool) (*rbacv3.Principal, error) {
	parts := strings.Split(v, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return authenticated(regex(".*/ns/" + strings.Join(parts, ".*") + "/.*")), nil
}

// sourceTrustDomain matches identities of a trust domain: "*" any,
// "td" exactly, "a*b" by pattern.
func sourceTrustDomain(v string, _ bool) (*rbacv3.Principal, error) {
	switch before, after, wild := strings.Cut(v, "*"); {
	case v == "*":
		return authenticated(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://"}}), nil
	case !wild:
		return authenticated(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://" + v + "/"}}), nil
	default:
		return authenticated(regex("spiffe://" + regexp.QuoteMeta(before) + "[^/]*" + regexp.QuoteMeta(after) + "/.*")), nil
	}
}

// serviceAccount matches "ns/sa", or "sa" in the policy's namespace.
func serviceAccount(policyNS string) func(string, bool) (*rbacv3.Principal, error) {
	return func(v string, _ bool) (*rbacv3.Principal, error) {
		ns, sa, ok := strings.Cut(v, "/")
		if !ok {
			ns, sa = policyNS, v
		}
		return authenticated(regex(fmt.Sprintf("spiffe://.+/ns/%s/(.+/|)sa/%s(/.+)?", regexp.QuoteMeta(ns), regexp.QuoteMeta(sa)))), nil
	}
}

func cidrRange(v string) (*corev3.CidrRange, error) {
	pfx, err := netip.ParsePrefix(v)
	if err != nil {
		a, aerr := netip.ParseAddr(v)
		if aerr != nil {
			return nil, fmt.Errorf("not an IP address or CIDR: %w", err)
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	return &corev3.CidrRange{AddressPrefix: pfx.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(pfx.Bits()))}, nil
}

func directRemoteIP(v string, _ bool) (*rbacv3.Principal, error) {
	c, err := cidrRange(v)
	if err != nil {
		return nil, err
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: c}}, nil
}

func remoteIP(v string, _ bool) (*rbacv3.Principal, error) {
	c, err := cidrRange(v)
	if err != nil {
		return nil, err
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: c}}, nil
}

func destIP(v string, _ bool) (*rbacv3.Permission, error) {
	c, err := cidrRange(v)
	if err != nil {
		return nil, err
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationIp{DestinationIp: c}}, nil
}

func destPort(v string, _ bool) (*rbacv3.Permission, error) {
	n, err := strconv.ParseUint(v, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("not a port: %w", err)
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: uint32(n)}}, nil
}

func host(v string, tcp bool) (*rbacv3.Permission, error) {
	if tcp {
		return nil, errHTTPOnly
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: headerMatch(":authority", v, true)}}, nil
}

func method(v string, tcp bool) (*rbacv3.Permission, error) {
	if tcp {
		return nil, errHTTPOnly
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: headerMatch(":method", v, false)}}, nil
}

func path(v string, tcp bool) (*rbacv3.Permission, error) {
	if tcp {
		return nil, errHTTPOnly
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
		Rule: &matcherv3.PathMatcher_Path{Path: stringMatch(v, "", false)}}}}, nil
}
