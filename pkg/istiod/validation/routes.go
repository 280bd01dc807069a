package validation

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	apinet "istio.io/api/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (c *checker) virtualService(vs *apinet.VirtualService) {
	if len(vs.GetHosts()) == 0 {
		c.add("spec.hosts", "[]", "at least one host required")
	}
	for i, h := range vs.GetHosts() {
		f := fmt.Sprintf("spec.hosts[%d]", i)
		if h == "" {
			c.add(f, `""`, "empty host")
		} else if c.webhook() {
			c.host(f, h, true)
		}
	}
	if len(vs.GetHttp()) == 0 && len(vs.GetTcp()) == 0 && len(vs.GetTls()) == 0 {
		c.add("spec", "{}", "http, tcp or tls routes required")
	}
	if c.webhook() {
		c.gateways(vs.GetGateways())
		c.exportTo("spec.exportTo", vs.GetExportTo())
	}
	for i, r := range vs.GetHttp() {
		c.httpRoute(fmt.Sprintf("spec.http[%d]", i), r)
	}
	for i, r := range vs.GetTcp() {
		c.tcpRoute(fmt.Sprintf("spec.tcp[%d]", i), r)
	}
	if c.webhook() {
		for i, r := range vs.GetTls() {
			c.tlsRoute(fmt.Sprintf("spec.tls[%d]", i), r)
		}
	}
}

func (c *checker) gateways(gws []string) {
	for i, g := range gws {
		f := fmt.Sprintf("spec.gateways[%d]", i)
		if g == "mesh" {
			continue
		}
		ns, name, ok := strings.Cut(g, "/")
		if !ok {
			ns, name = "", g
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			c.add(f, g, "not a gateway name (mesh, NAME or NAMESPACE/NAME)")
		} else if ok && len(validation.IsDNS1123Label(ns)) > 0 {
			c.add(f, g, "not a gateway namespace")
		}
	}
}

// weighted is a route destination with its weight (HTTP, TCP and TLS
// routes each have their own type for it).
type weighted interface {
	GetDestination() *apinet.Destination
	GetWeight() int32
}

// routes checks the destinations of one route (f), as Istio 1.31 does: at
// least one, each with a host and a weight not negative; weights are
// relative, so they need not add up to 100, but more than one destination
// with no weight at all would take no traffic.
func routes[W weighted](c *checker, f string, ds []W) {
	if len(ds) == 0 {
		c.add(f+".route", "[]", "at least one destination required")
	}
	sum := int64(0)
	for j, d := range ds {
		df := fmt.Sprintf("%s.route[%d]", f, j)
		c.destination(df+".destination", d.GetDestination())
		if w := d.GetWeight(); w < 0 {
			c.add(df+".weight", w, "must not be negative")
		}
		sum += int64(d.GetWeight())
	}
	if len(ds) > 1 && sum == 0 {
		c.add(f+".route[*].weight", sum, "no destination has a weight: set one at least")
	}
}

// destination checks a route destination: a host and an optional port
// and, for the webhook, the host's form and the subset (looked up with the
// Validator's SubsetLookup).
func (c *checker) destination(field string, d *apinet.Destination) {
	if d == nil && c.webhook() {
		c.add(field, "null", "destination required")
	}
	if d.GetHost() == "" {
		c.add(field+".host", `""`, "required")
	} else if c.webhook() {
		c.host(field+".host", d.GetHost(), true)
	}
	c.optPort(field+".port.number", d.GetPort().GetNumber())
	if c.webhook() {
		c.subset(field+".subset", d)
	}
}

func (c *checker) subset(field string, d *apinet.Destination) {
	s := d.GetSubset()
	if s == "" {
		return
	}
	if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
		c.add(field, s, "not a subset name: "+msgs[0])
		return
	}
	if c.v.Subsets == nil || strings.HasPrefix(d.GetHost(), "*") {
		return
	}
	host := qualify(d.GetHost(), c.ns, c.v.DomainSuffix)
	names, known := c.v.Subsets.Subsets(host)
	if known && !slices.Contains(names, s) {
		c.add(field, s, fmt.Sprintf("unknown subset: no DestinationRule for host %s defines it (known subsets: %s)", host, strings.Join(names, ", ")))
	}
}

// stringMatch checks a match: a match type when required, a valid regex.
func (c *checker) stringMatch(field string, m *apinet.StringMatch, required bool) {
	switch t := m.GetMatchType().(type) {
	case nil:
		if m != nil && required {
			c.add(field, "{}", "one of exact, prefix or regex required")
		}
	case *apinet.StringMatch_Regex:
		if c.webhook() {
			c.regex(field+".regex", t.Regex)
		}
	}
}

func (c *checker) httpRoute(f string, r *apinet.HTTPRoute) {
	if len(r.GetRoute()) > 0 || (r.GetRedirect() == nil && r.GetDirectResponse() == nil) {
		routes(c, f, r.GetRoute())
	}
	for j, m := range r.GetMatch() {
		mf := fmt.Sprintf("%s.match[%d]", f, j)
		c.stringMatch(mf+".uri", m.GetUri(), true)
		for _, k := range sortedKeys(m.GetHeaders()) {
			c.stringMatch(mf+".headers["+k+"]", m.GetHeaders()[k], true)
		}
		if c.webhook() {
			c.stringMatch(mf+".scheme", m.GetScheme(), false)
			c.stringMatch(mf+".method", m.GetMethod(), false)
			c.stringMatch(mf+".authority", m.GetAuthority(), false)
			for _, k := range sortedKeys(m.GetQueryParams()) {
				c.stringMatch(mf+".queryParams["+k+"]", m.GetQueryParams()[k], false)
			}
			c.optPort(mf+".port", m.GetPort())
			c.labels(mf+".sourceLabels", m.GetSourceLabels())
		}
	}
	if t := r.GetTimeout(); t != nil && (t.GetSeconds() < 0 || t.GetNanos() < 0) {
		c.add(f+".timeout", t.AsDuration(), "must not be negative")
	}
	if rt := r.GetRetries(); rt != nil && rt.GetAttempts() < 0 {
		c.add(f+".retries.attempts", rt.GetAttempts(), "must not be negative")
	}
	if c.webhook() {
		c.httpActions(f, r)
	}
}

// httpActions checks what an HTTP route does besides routing: redirects,
// direct responses, rewrites, faults, mirrors and retries.
func (c *checker) httpActions(f string, r *apinet.HTTPRoute) {
	if len(r.GetRoute()) > 0 && r.GetRedirect() != nil {
		c.add(f, "route+redirect", "a route cannot have both route and redirect")
	}
	if len(r.GetRoute()) > 0 && r.GetDirectResponse() != nil {
		c.add(f, "route+directResponse", "a route cannot have both route and directResponse")
	}
	if r.GetRedirect() != nil && r.GetDirectResponse() != nil {
		c.add(f, "redirect+directResponse", "a route cannot have both redirect and directResponse")
	}
	if dr := r.GetDirectResponse(); dr != nil && (dr.GetStatus() < 200 || dr.GetStatus() > 599) {
		c.add(f+".directResponse.status", dr.GetStatus(), "HTTP status must be in 200..599")
	}
	if rd := r.GetRedirect(); rd != nil {
		if code := rd.GetRedirectCode(); code != 0 && (code < 300 || code > 399) {
			c.add(f+".redirect.redirectCode", code, "redirect code must be in 300..399")
		}
		if p, ok := rd.GetRedirectPort().(*apinet.HTTPRedirect_Port); ok {
			c.port(f+".redirect.port", int64(p.Port))
		}
	}
	if rw := r.GetRewrite(); rw != nil && rw.GetUri() != "" && rw.GetUriRegexRewrite() != nil {
		c.add(f+".rewrite", "uri+uriRegexRewrite", "only one of uri and uriRegexRewrite")
	}
	if rr := r.GetRewrite().GetUriRegexRewrite(); rr != nil {
		c.regex(f+".rewrite.uriRegexRewrite.match", rr.GetMatch())
	}
	if fault := r.GetFault(); fault != nil {
		if d := fault.GetDelay(); d != nil {
			c.percent(f+".fault.delay.percentage", d.GetPercentage())
			if d.GetFixedDelay() == nil {
				c.add(f+".fault.delay.fixedDelay", "null", "required")
			}
		}
		if a := fault.GetAbort(); a != nil {
			c.percent(f+".fault.abort.percentage", a.GetPercentage())
			if s, ok := a.GetErrorType().(*apinet.HTTPFaultInjection_Abort_HttpStatus); ok && (s.HttpStatus < 200 || s.HttpStatus > 599) {
				c.add(f+".fault.abort.httpStatus", s.HttpStatus, "HTTP status must be in 200..599")
			}
		}
	}
	if m := r.GetMirror(); m != nil {
		c.destination(f+".mirror", m)
	}
	c.percent(f+".mirrorPercentage", r.GetMirrorPercentage())
	c.retries(f+".retries", r.GetRetries())
}

// retries checks a retry policy as Istio 1.31's webhook does: no other
// field when attempts is 0 (retries off), durations in whole milliseconds
// from 1ms, and each retryOn condition one Envoy knows or an HTTP status
// code.
func (c *checker) retries(f string, rt *apinet.HTTPRetry) {
	if rt == nil {
		return
	}
	if rt.GetAttempts() == 0 && (rt.GetPerTryTimeout() != nil || rt.GetRetryOn() != "" || rt.GetRetryRemoteLocalities() != nil) {
		c.add(f+".attempts", 0, "retries are off (0), yet perTryTimeout, retryOn or retryRemoteLocalities is set")
	}
	c.millis(f+".perTryTimeout", rt.GetPerTryTimeout())
	c.millis(f+".backoff", rt.GetBackoff())
	if on := rt.GetRetryOn(); on != "" {
		for _, cond := range strings.Split(on, ",") {
			if n, err := strconv.Atoi(cond); (err != nil || http.StatusText(n) == "") && !retryOn[cond] {
				c.add(f+".retryOn", cond, "neither an Envoy retry condition nor an HTTP status code")
			}
		}
	}
}

// retryOn are the retry conditions Envoy's router takes (x-envoy-retry-on
// and x-envoy-retry-grpc-on).
var retryOn = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true, "connect-failure": true,
	"retriable-4xx": true, "refused-stream": true, "retriable-status-codes": true, "retriable-headers": true,
	"envoy-ratelimited": true, "http3-post-connect-failure": true,
	"cancelled": true, "deadline-exceeded": true, "internal": true, "resource-exhausted": true, "unavailable": true,
}

// millis checks a duration Envoy takes in milliseconds: at least 1ms, and
// whole milliseconds.
func (c *checker) millis(field string, d *durationpb.Duration) {
	switch {
	case d == nil:
	case d.AsDuration() < time.Millisecond:
		c.add(field, d.AsDuration(), "must be at least 1ms")
	case d.AsDuration()%time.Millisecond != 0:
		c.add(field, d.AsDuration(), "must be whole milliseconds")
	}
}

func (c *checker) tcpRoute(f string, r *apinet.TCPRoute) {
	routes(c, f, r.GetRoute())
	if !c.webhook() {
		return
	}
	for j, m := range r.GetMatch() {
		mf := fmt.Sprintf("%s.match[%d]", f, j)
		c.optPort(mf+".port", m.GetPort())
		for k, d := range m.GetDestinationSubnets() {
			c.ipOrCIDR(fmt.Sprintf("%s.destinationSubnets[%d]", mf, k), d)
		}
	}
}

// tlsRoute is checked for the webhook only: istiod generates HTTP and TCP
// routes, not TLS ones, so it needs nothing of them.
func (c *checker) tlsRoute(f string, r *apinet.TLSRoute) {
	if len(r.GetMatch()) == 0 {
		c.add(f+".match", "[]", "TLS routes need at least one match")
	}
	for j, m := range r.GetMatch() {
		mf := fmt.Sprintf("%s.match[%d]", f, j)
		if len(m.GetSniHosts()) == 0 {
			c.add(mf+".sniHosts", "[]", "at least one SNI host required")
		}
		for k, h := range m.GetSniHosts() {
			c.host(fmt.Sprintf("%s.sniHosts[%d]", mf, k), h, true)
		}
		c.optPort(mf+".port", m.GetPort())
	}
	routes(c, f, r.GetRoute())
}
