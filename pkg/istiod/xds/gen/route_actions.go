package gen

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	apinet "istio.io/api/networking/v1alpha3"
	networking "istio.io/client-go/pkg/apis/networking/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// setTimeout sets a route's timeout (nil: none) as Istio does: Envoy also
// caps the grpc-timeout header at it; gRPC clients read it from
// max_stream_duration.
func setTimeout(a *routev3.RouteAction, t *durationpb.Duration, grpc bool) {
	d := durationpb.New(0)
	if t != nil {
		d = durationpb.New(t.AsDuration())
	}
	a.Timeout = d
	if grpc {
		a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(d.AsDuration())}
		return
	}
	a.MaxGrpcTimeout = durationpb.New(d.AsDuration()) //nolint:staticcheck // what Istio sets for Envoy
}

// applyRewrite sets the path rewrite of a route (a regex rewrite wins over
// a prefix one) and returns the authority to rewrite to: the rewrite's,
// else the one from header operations.
func (b *routeBuilder) applyRewrite(a *routev3.RouteAction, rw *apinet.HTTPRewrite, authority string) string {
	if rw == nil {
		return authority
	}
	if re := rw.GetUriRegexRewrite(); re != nil {
		a.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: re.GetMatch()}, Substitution: re.GetRewrite()}
	} else if uri := rw.GetUri(); uri != "" {
		a.PrefixRewrite = uri
	}
	if rw.GetAuthority() != "" {
		return rw.GetAuthority()
	}
	return authority
}

// mirrors converts mirror (with mirrorPercentage, or the deprecated
// integer mirrorPercent) and mirrors into mirror policies; a percentage of
// zero mirrors nothing, none at all mirrors everything.
func (b *routeBuilder) mirrors(hr *apinet.HTTPRoute, vsNS string, svc *model.Service, port uint16) []*routev3.RouteAction_RequestMirrorPolicy {
	var out []*routev3.RouteAction_RequestMirrorPolicy
	add := func(d *apinet.Destination, p *apinet.Percent, legacy *wrapperspb.UInt32Value) {
		frac := hundredths(100)
		switch {
		case p != nil:
			if p.GetValue() <= 0 {
				return
			}
			frac = millionths(p)
		case legacy != nil:
			if legacy.GetValue() == 0 {
				return
			}
			frac = hundredths(legacy.GetValue())
		}
		out = append(out, &routev3.RouteAction_RequestMirrorPolicy{
			Cluster: b.destination(d, vsNS, svc, port), RuntimeFraction: runtimePercent(frac), TraceSampled: wrapperspb.Bool(false),
		})
	}
	if m := hr.GetMirror(); m != nil {
		var legacy *wrapperspb.UInt32Value
		if mp := hr.GetMirrorPercent(); mp != nil { //nolint:staticcheck // Istio still reads the deprecated integer
			legacy = wrapperspb.UInt32(mp.GetValue())
		}
		add(m, hr.GetMirrorPercentage(), legacy)
	}
	for _, m := range hr.GetMirrors() {
		if m.GetDestination() != nil {
			add(m.GetDestination(), m.GetPercentage(), nil)
		}
	}
	return out
}

// redirectCodes are the redirect codes Envoy can answer with.
var redirectCodes = map[uint32]routev3.RedirectAction_RedirectResponseCode{
	0: routev3.RedirectAction_MOVED_PERMANENTLY, 301: routev3.RedirectAction_MOVED_PERMANENTLY,
	302: routev3.RedirectAction_FOUND, 303: routev3.RedirectAction_SEE_OTHER,
	307: routev3.RedirectAction_TEMPORARY_REDIRECT, 308: routev3.RedirectAction_PERMANENT_REDIRECT,
}

// applyRedirect makes r answer with a redirect, as Istio does for a
// sidecar on port; false for a code Envoy cannot send.
func applyRedirect(r *routev3.Route, in *apinet.HTTPRedirect, port uint16) bool {
	code, ok := redirectCodes[in.GetRedirectCode()]
	if !ok {
		return false
	}
	ra := &routev3.RedirectAction{HostRedirect: in.GetAuthority(), ResponseCode: code}
	ra.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: in.GetUri()}
	if in.GetScheme() != "" {
		ra.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: in.GetScheme()}
	}
	if in.GetRedirectPort() != nil {
		switch p := in.GetRedirectPort().(type) {
		case *apinet.HTTPRedirect_DerivePort:
			if p.DerivePort == apinet.HTTPRedirect_FROM_REQUEST_PORT {
				ra.PortRedirect = uint32(port)
			}
		case *apinet.HTTPRedirect_Port:
			ra.PortRedirect = p.Port
		}
		scheme := in.GetScheme()
		if scheme == "" {
			scheme = "http"
		}
		if (ra.PortRedirect == 80 && scheme == "http") || (ra.PortRedirect == 443 && scheme == "https") {
			ra.PortRedirect = 0
		}
	}
	r.Action = &routev3.Route_Redirect{Redirect: ra}
	return true
}

// operation names route r for tracing as Istio does: the host and port of
// the one service cluster it sends to, else the VirtualService's name and
// the port; then the path it matches.
func operation(r *routev3.Route, vsName string, port uint16) string {
	path := "/*"
	switch m := r.GetMatch().GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		path = m.Prefix + "*"
	case *routev3.RouteMatch_Path:
		path = m.Path
	case *routev3.RouteMatch_SafeRegex:
		path = m.SafeRegex.GetRegex()
	}
	if p, _, host, ok := model.ParseClusterName(r.GetRoute().GetCluster()); ok {
		return host + ":" + strconv.Itoa(int(p)) + path
	}
	return vsName + ":" + strconv.Itoa(int(port)) + path
}

// attemptCount reports whether a sidecar's virtual hosts tell the upstream
// the attempt's number (x-envoy-attempt-count), as Istio's do unless the
// mesh's proxy config turns it off (proxyHeaders.attemptCount.disabled).
func attemptCount(m *meshconfig.MeshConfig) bool {
	return !m.GetDefaultConfig().GetProxyHeaders().GetAttemptCount().GetDisabled().GetValue()
}

// configMetadata names the VirtualService a route comes from as Istio
// does, in filter metadata "istio" (its "config": the object's API path),
// where istioctl's route views read it.
func configMetadata(vs *networking.VirtualService) *corev3.Metadata {
	path := "/apis/networking.istio.io/v1/namespaces/" + vs.Namespace + "/virtual-service/" + vs.Name
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{"config": structpb.NewStringValue(path)}},
	}}
}
