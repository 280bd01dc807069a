package gen

import (
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apinet "istio.io/api/networking/v1alpha3"
)

// CORSFilter is the name of Envoy's CORS filter.
const CORSFilter = "envoy.filters.http.cors"

// corsFilter is the empty CORS filter Envoy connection managers carry, so
// that routes can configure it.
func corsFilter() *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: CORSFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&corsv3.Cors{})}}
}

// headerOps are Istio header operations in Envoy's terms.
type headerOps struct {
	reqAdd, respAdd       []*corev3.HeaderValueOption
	reqRemove, respRemove []string
	authority             string // a set or add of :authority / host
}

// headerOperations converts request and response header operations:
// "set" overwrites, "add" appends; pseudo-headers and host cannot be
// touched (":authority" and "host" become a host rewrite instead).
func headerOperations(h *apinet.Headers) headerOps {
	var ops headerOps
	var setAuth, addAuth string
	ops.reqAdd, setAuth = headerValues(h.GetRequest().GetSet(), corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	add, addAuth := headerValues(h.GetRequest().GetAdd(), corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	ops.reqAdd = append(ops.reqAdd, add...)
	ops.respAdd, _ = headerValues(h.GetResponse().GetSet(), corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	add, _ = headerValues(h.GetResponse().GetAdd(), corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	ops.respAdd = append(ops.respAdd, add...)
	ops.reqRemove = settable(h.GetRequest().GetRemove())
	ops.respRemove = settable(h.GetResponse().GetRemove())
	ops.authority = addAuth
	if setAuth != "" {
		ops.authority = setAuth
	}
	return ops
}

// headerValues renders headers sorted by name, skipping those Envoy cannot
// change, and returns an authority among them.
func headerValues(m map[string]string, action corev3.HeaderValueOption_HeaderAppendAction) ([]*corev3.HeaderValueOption, string) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var out []*corev3.HeaderValueOption
	authority := ""
	for _, k := range names {
		if strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host") {
			authority = m[k]
		}
		if internalHeader(k) {
			continue
		}
		out = append(out, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: m[k]}, AppendAction: action})
	}
	return out, authority
}

func internalHeader(k string) bool { return strings.HasPrefix(k, ":") || strings.EqualFold(k, "host") }

func settable(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !internalHeader(k) {
			out = append(out, k)
		}
	}
	return out
}

// applyHeaders adds route-level header operations to r.
func applyHeaders(r *routev3.Route, ops headerOps) {
	r.RequestHeadersToAdd = append(r.RequestHeadersToAdd, ops.reqAdd...)
	r.ResponseHeadersToAdd = append(r.ResponseHeadersToAdd, ops.respAdd...)
	r.RequestHeadersToRemove = append(r.RequestHeadersToRemove, ops.reqRemove...)
	r.ResponseHeadersToRemove = append(r.ResponseHeadersToRemove, ops.respRemove...)
}

// corsPolicy converts a route's CORS policy as Istio does: enabled for
// every request, unmatched preflights forwarded unless told to ignore them.
func corsPolicy(in *apinet.CorsPolicy) *corsv3.CorsPolicy {
	out := &corsv3.CorsPolicy{
		ForwardNotMatchingPreflights: wrapperspb.Bool(in.GetUnmatchedPreflights() != apinet.CorsPolicy_IGNORE),
		FilterEnabled:                runtimePercent(hundredths(100)),
		AllowCredentials:             in.GetAllowCredentials(),
		AllowHeaders:                 strings.Join(in.GetAllowHeaders(), ","),
		AllowMethods:                 strings.Join(in.GetAllowMethods(), ","),
		ExposeHeaders:                strings.Join(in.GetExposeHeaders(), ","),
	}
	if origins := in.GetAllowOrigins(); origins != nil {
		for _, o := range origins {
			if sm := stringMatcher(o); sm != nil {
				out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, sm)
			}
		}
	} else {
		for _, o := range in.GetAllowOrigin() { //nolint:staticcheck // Istio still reads the deprecated list
			out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: o}})
		}
	}
	if in.GetMaxAge() != nil {
		out.MaxAge = strconv.FormatInt(in.GetMaxAge().GetSeconds(), 10)
	}
	return out
}
