package validation

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	apinet "istio.io/api/networking/v1alpha3"
	apisec "istio.io/api/security/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// checker collects the problems of one object.
type checker struct {
	v    *Validator
	ns   string
	errs []error
}

func (c *checker) add(field string, value any, reason string) {
	c.errs = append(c.errs, &model.FieldError{Field: field, Value: value, Reason: reason})
}

var labelRE = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

// host checks a host name: DNS labels, optionally behind a "*." wildcard
// (or "*" alone when wildcard is allowed).
func (c *checker) host(field, h string, wildcard bool) {
	switch {
	case h == "":
		c.add(field, `""`, "empty host")
		return
	case h == "*":
		if !wildcard {
			c.add(field, h, "a wildcard is not allowed here")
		}
		return
	case len(h) > 255:
		c.add(field, h, "host name longer than 255 characters")
		return
	}
	rest := h
	if strings.HasPrefix(h, "*.") {
		if !wildcard {
			c.add(field, h, "a wildcard is not allowed here")
			return
		}
		rest = h[2:]
	}
	if strings.HasSuffix(rest, ".") {
		c.add(field, h, "host name must not end with a dot")
		return
	}
	for _, l := range strings.Split(rest, ".") {
		if len(l) > 63 || !labelRE.MatchString(l) {
			c.add(field, h, fmt.Sprintf("malformed host: label %q is not a DNS-1123 label (letters, digits, '-', at most 63, wildcard only as a leading \"*.\")", l))
			return
		}
	}
}

// port checks a required port number.
func (c *checker) port(field string, n uint32) {
	if n < 1 || n > 65535 {
		c.add(field, n, "port must be in 1..65535")
	}
}

// optPort checks a port number where 0 means unset.
func (c *checker) optPort(field string, n uint32) {
	if n > 65535 {
		c.add(field, n, "port must be in 1..65535")
	}
}

var protocols = []string{"HTTP", "HTTPS", "GRPC", "GRPC-WEB", "HTTP2", "HTTP_PROXY", "MONGO", "MYSQL", "REDIS", "TCP", "TLS", "UDP"}

func (c *checker) protocol(field, p string) {
	if p != "" && !slices.Contains(protocols, strings.ToUpper(p)) {
		c.add(field, p, "unknown protocol (want one of "+strings.Join(protocols, ", ")+")")
	}
}

func (c *checker) labels(field string, m map[string]string) {
	for _, k := range sortedKeys(m) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			c.add(field+"["+k+"]", k, "invalid label key: "+msgs[0])
		}
		if msgs := validation.IsValidLabelValue(m[k]); len(msgs) > 0 {
			c.add(field+"["+k+"]", m[k], "invalid label value: "+msgs[0])
		}
	}
}

func (c *checker) percent(field string, p *apinet.Percent) {
	if p != nil && (p.GetValue() < 0 || p.GetValue() > 100) {
		c.add(field, p.GetValue(), "percentage must be in 0..100")
	}
}

func (c *checker) regex(field, re string) {
	if _, err := regexp.Compile(re); err != nil {
		c.add(field, re, "invalid RE2 regular expression: "+err.Error())
	}
}

func (c *checker) stringMatch(field string, m *apinet.StringMatch) {
	if m == nil {
		return
	}
	if r, ok := m.GetMatchType().(*apinet.StringMatch_Regex); ok {
		c.regex(field+".regex", r.Regex)
	}
}

func (c *checker) exportTo(field string, to []string) {
	for i, ns := range to {
		if ns == "." || ns == "*" || ns == "~" {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			c.add(fmt.Sprintf("%s[%d]", field, i), ns, `want ".", "*" or a namespace name`)
		}
	}
}

// fqdn qualifies a short host name in the object's namespace.
func (c *checker) fqdn(h string) string {
	if strings.Contains(h, ".") {
		return h
	}
	suffix := c.v.DomainSuffix
	if suffix == "" {
		suffix = "cluster.local"
	}
	return h + "." + c.ns + ".svc." + suffix
}

// destination checks a route destination and, with a SubsetLookup, its subset.
func (c *checker) destination(field string, d *apinet.Destination) {
	if d == nil {
		c.add(field, "null", "destination required")
		return
	}
	if d.GetHost() != "" {
		c.host(field+".host", d.GetHost(), true)
	}
	c.optPort(field+".port.number", d.GetPort().GetNumber())
	s := d.GetSubset()
	if s == "" {
		return
	}
	if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
		c.add(field+".subset", s, "not a subset name: "+msgs[0])
		return
	}
	if c.v.Subsets == nil || strings.HasPrefix(d.GetHost(), "*") {
		return
	}
	host := c.fqdn(d.GetHost())
	names, known := c.v.Subsets.Subsets(host)
	if known && !slices.Contains(names, s) {
		c.add(field+".subset", s, fmt.Sprintf("unknown subset: no DestinationRule for host %s defines it (known subsets: %s)", host, strings.Join(names, ", ")))
	}
}

func (c *checker) virtualService(vs *apinet.VirtualService) {
	for i, h := range vs.GetHosts() {
		c.host(fmt.Sprintf("spec.hosts[%d]", i), h, true)
	}
	for i, g := range vs.GetGateways() {
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
	c.exportTo("spec.exportTo", vs.GetExportTo())
	for i, r := range vs.GetHttp() {
		f := fmt.Sprintf("spec.http[%d]", i)
		for j, d := range r.GetRoute() {
			c.destination(fmt.Sprintf("%s.route[%d].destination", f, j), d.GetDestination())
		}
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
				c.port(f+".redirect.port", p.Port)
			}
		}
		if rw := r.GetRewrite(); rw != nil && rw.GetUri() != "" && rw.GetUriRegexRewrite() != nil {
			c.add(f+".rewrite", "uri+uriRegexRewrite", "only one of uri and uriRegexRewrite")
		}
		if rr := r.GetRewrite().GetUriRegexRewrite(); rr != nil {
			c.regex(f+".rewrite.uriRegexRewrite.match", rr.GetMatch())
		}
		for j, m := range r.GetMatch() {
			mf := fmt.Sprintf("%s.match[%d]", f, j)
			c.stringMatch(mf+".uri", m.GetUri())
			c.stringMatch(mf+".scheme", m.GetScheme())
			c.stringMatch(mf+".method", m.GetMethod())
			c.stringMatch(mf+".authority", m.GetAuthority())
			for _, k := range sortedKeys(m.GetHeaders()) {
				c.stringMatch(mf+".headers["+k+"]", m.GetHeaders()[k])
			}
			for _, k := range sortedKeys(m.GetQueryParams()) {
				c.stringMatch(mf+".queryParams["+k+"]", m.GetQueryParams()[k])
			}
			c.optPort(mf+".port", m.GetPort())
			c.labels(mf+".sourceLabels", m.GetSourceLabels())
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
		if rt := r.GetRetries(); rt != nil {
			if p := rt.GetPerTryTimeout(); p != nil && p.AsDuration() < 1e6 {
				c.add(f+".retries.perTryTimeout", p.AsDuration(), "must be at least 1ms")
			}
		}
	}
	for i, r := range vs.GetTcp() {
		f := fmt.Sprintf("spec.tcp[%d]", i)
		for j, m := range r.GetMatch() {
			c.optPort(fmt.Sprintf("%s.match[%d].port", f, j), m.GetPort())
			for k, d := range m.GetDestinationSubnets() {
				if _, err := netip.ParsePrefix(d); err != nil {
					if _, err := netip.ParseAddr(d); err != nil {
						c.add(fmt.Sprintf("%s.match[%d].destinationSubnets[%d]", f, j, k), d, "not an IP address or CIDR")
					}
				}
			}
		}
		for j, d := range r.GetRoute() {
			c.destination(fmt.Sprintf("%s.route[%d].destination", f, j), d.GetDestination())
		}
	}
	for i, r := range vs.GetTls() {
		f := fmt.Sprintf("spec.tls[%d]", i)
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
		if len(r.GetRoute()) == 0 {
			c.add(f+".route", "[]", "at least one destination required")
		}
		sum := int32(0)
		for j, d := range r.GetRoute() {
			c.destination(fmt.Sprintf("%s.route[%d].destination", f, j), d.GetDestination())
			sum += d.GetWeight()
		}
		if len(r.GetRoute()) > 1 && sum != 100 {
			c.add(f+".route[*].weight", sum, "weights must add up to 100")
		}
	}
}

func (c *checker) trafficPolicy(f string, tp *apinet.TrafficPolicy) {
	if tp == nil {
		return
	}
	seen := map[uint32]bool{}
	for i, p := range tp.GetPortLevelSettings() {
		pf := fmt.Sprintf("%s.portLevelSettings[%d]", f, i)
		n := p.GetPort().GetNumber()
		c.port(pf+".port.number", n)
		if seen[n] {
			c.add(pf+".port.number", n, "duplicate port")
		}
		seen[n] = true
		c.policyParts(pf, p.GetConnectionPool(), p.GetOutlierDetection(), p.GetTls())
	}
	c.policyParts(f, tp.GetConnectionPool(), tp.GetOutlierDetection(), tp.GetTls())
}

func (c *checker) policyParts(f string, cp *apinet.ConnectionPoolSettings, od *apinet.OutlierDetection, tls *apinet.ClientTLSSettings) {
	if t := cp.GetTcp(); t != nil && t.GetMaxConnections() < 0 {
		c.add(f+".connectionPool.tcp.maxConnections", t.GetMaxConnections(), "must not be negative")
	}
	if h := cp.GetHttp(); h != nil {
		for name, n := range map[string]int32{
			"http1MaxPendingRequests": h.GetHttp1MaxPendingRequests(), "http2MaxRequests": h.GetHttp2MaxRequests(),
			"maxRequestsPerConnection": h.GetMaxRequestsPerConnection(), "maxRetries": h.GetMaxRetries(),
		} {
			if n < 0 {
				c.add(f+".connectionPool.http."+name, n, "must not be negative")
			}
		}
	}
	if od != nil {
		if p := od.GetMaxEjectionPercent(); p < 0 || p > 100 {
			c.add(f+".outlierDetection.maxEjectionPercent", p, "percentage must be in 0..100")
		}
		if p := od.GetMinHealthPercent(); p < 0 || p > 100 {
			c.add(f+".outlierDetection.minHealthPercent", p, "percentage must be in 0..100")
		}
	}
	if tls != nil && tls.GetMode() == apinet.ClientTLSSettings_MUTUAL && tls.GetCredentialName() == "" &&
		(tls.GetClientCertificate() == "" || tls.GetPrivateKey() == "") {
		c.add(f+".tls", "MUTUAL", "mode MUTUAL needs credentialName or clientCertificate and privateKey")
	}
}

func (c *checker) destinationRule(dr *apinet.DestinationRule) {
	if dr.GetHost() != "" {
		c.host("spec.host", dr.GetHost(), true)
	}
	c.exportTo("spec.exportTo", dr.GetExportTo())
	c.trafficPolicy("spec.trafficPolicy", dr.GetTrafficPolicy())
	for i, s := range dr.GetSubsets() {
		f := fmt.Sprintf("spec.subsets[%d]", i)
		if s.GetName() != "" {
			if msgs := validation.IsDNS1123Label(s.GetName()); len(msgs) > 0 {
				c.add(f+".name", s.GetName(), "not a subset name: "+msgs[0])
			}
		}
		c.labels(f+".labels", s.GetLabels())
		c.trafficPolicy(f+".trafficPolicy", s.GetTrafficPolicy())
	}
	if sel := dr.GetWorkloadSelector(); sel != nil {
		c.labels("spec.workloadSelector.matchLabels", sel.GetMatchLabels())
	}
}

func (c *checker) serviceEntry(se *apinet.ServiceEntry) {
	for i, h := range se.GetHosts() {
		if h != "*" && h != "" && !strings.Contains(h, "/") {
			c.host(fmt.Sprintf("spec.hosts[%d]", i), h, true)
		}
	}
	c.exportTo("spec.exportTo", se.GetExportTo())
	names := map[string]bool{}
	for i, p := range se.GetPorts() {
		f := fmt.Sprintf("spec.ports[%d]", i)
		c.protocol(f+".protocol", p.GetProtocol())
		names[p.GetName()] = true
	}
	for i, ep := range se.GetEndpoints() {
		f := fmt.Sprintf("spec.endpoints[%d]", i)
		for _, name := range sortedKeys(ep.GetPorts()) {
			if !names[name] {
				c.add(f+".ports["+name+"]", name, "not a port name of this ServiceEntry")
			}
		}
		c.labels(f+".labels", ep.GetLabels())
		if w := ep.GetWeight(); w > 1<<24 {
			c.add(f+".weight", w, "too large")
		}
	}
	if se.GetResolution() == apinet.ServiceEntry_DNS && len(se.GetEndpoints()) == 0 {
		for i, h := range se.GetHosts() {
			if strings.HasPrefix(h, "*") {
				c.add(fmt.Sprintf("spec.hosts[%d]", i), h, "a wildcard host cannot be resolved by DNS without endpoints")
			}
		}
	}
	if sel := se.GetWorkloadSelector(); sel != nil {
		c.labels("spec.workloadSelector.labels", sel.GetLabels())
		if len(se.GetEndpoints()) > 0 {
			c.add("spec.workloadSelector", "{...}", "only one of workloadSelector and endpoints")
		}
	}
}

func (c *checker) sidecar(sc *apinet.Sidecar) {
	if sel := sc.GetWorkloadSelector(); sel != nil {
		c.labels("spec.workloadSelector.labels", sel.GetLabels())
	}
	for i, in := range sc.GetIngress() {
		f := fmt.Sprintf("spec.ingress[%d]", i)
		if in.GetPort() == nil {
			c.add(f+".port", "null", "required")
		} else {
			c.port(f+".port.number", in.GetPort().GetNumber())
			c.protocol(f+".port.protocol", in.GetPort().GetProtocol())
		}
		if ep := in.GetDefaultEndpoint(); ep != "" && !strings.HasPrefix(ep, "unix://") {
			host, port, err := splitHostPort(ep)
			if err != nil || (host != "127.0.0.1" && host != "0.0.0.0" && host != "[::1]" && host != "[::]") || port < 1 || port > 65535 {
				c.add(f+".defaultEndpoint", ep, "want 127.0.0.1:PORT, 0.0.0.0:PORT, [::1]:PORT, [::]:PORT or unix://PATH")
			}
		}
	}
	for i, eg := range sc.GetEgress() {
		f := fmt.Sprintf("spec.egress[%d]", i)
		if p := eg.GetPort(); p != nil {
			c.port(f+".port.number", p.GetNumber())
			c.protocol(f+".port.protocol", p.GetProtocol())
		}
		for j, h := range eg.GetHosts() {
			hf := fmt.Sprintf("%s.hosts[%d]", f, j)
			ns, host, ok := strings.Cut(h, "/")
			if !ok || ns == "" || host == "" {
				continue // model reports the form
			}
			if ns != "." && ns != "*" && ns != "~" && len(validation.IsDNS1123Label(ns)) > 0 {
				c.add(hf, h, `namespace must be ".", "*", "~" or a namespace name`)
			}
			c.host(hf, host, true)
		}
	}
}

func (c *checker) peerAuthentication(pa *apisec.PeerAuthentication) {
	sel := pa.GetSelector()
	if sel != nil {
		c.labels("spec.selector.matchLabels", sel.GetMatchLabels())
	}
	if len(pa.GetPortLevelMtls()) > 0 && len(sel.GetMatchLabels()) == 0 {
		c.add("spec.portLevelMtls", "{...}", "port-level mTLS needs a workload selector")
	}
	ports := make([]uint32, 0, len(pa.GetPortLevelMtls()))
	for p := range pa.GetPortLevelMtls() {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	for _, p := range ports {
		f := "spec.portLevelMtls[" + strconv.FormatUint(uint64(p), 10) + "]"
		c.port(f, p)
		if pa.GetPortLevelMtls()[p] == nil {
			c.add(f, "null", "mode required")
		}
	}
}

func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("no port")
	}
	n, err := strconv.Atoi(s[i+1:])
	return s[:i], n, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
