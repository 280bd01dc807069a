package validation

import (
	"fmt"
	"net/netip"
	"strings"

	apinet "istio.io/api/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (c *checker) destinationRule(dr *apinet.DestinationRule) {
	if dr.GetHost() == "" {
		c.add("spec.host", `""`, "required")
	} else if c.webhook() {
		c.host("spec.host", dr.GetHost(), true)
	}
	if c.webhook() {
		c.exportTo("spec.exportTo", dr.GetExportTo())
		c.trafficPolicy("spec.trafficPolicy", dr.GetTrafficPolicy())
		if sel := dr.GetWorkloadSelector(); sel != nil {
			c.labels("spec.workloadSelector.matchLabels", sel.GetMatchLabels())
		}
	}
	seen := map[string]bool{}
	for i, s := range dr.GetSubsets() {
		f := fmt.Sprintf("spec.subsets[%d]", i)
		switch name := s.GetName(); {
		case name == "":
			c.add(f+".name", `""`, "required")
		case c.webhook() && len(validation.IsDNS1123Label(name)) > 0:
			c.add(f+".name", name, "not a subset name: "+validation.IsDNS1123Label(name)[0])
		case seen[name]:
			c.add(f+".name", name, "duplicate subset name")
		}
		seen[s.GetName()] = true
		if len(s.GetLabels()) == 0 {
			c.add(f+".labels", "{}", "at least one label required")
		}
		if c.webhook() {
			c.labels(f+".labels", s.GetLabels())
			c.trafficPolicy(f+".trafficPolicy", s.GetTrafficPolicy())
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
		c.port(pf+".port.number", int64(n))
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
		for _, n := range []struct {
			name string
			n    int32
		}{
			{"http1MaxPendingRequests", h.GetHttp1MaxPendingRequests()}, {"http2MaxRequests", h.GetHttp2MaxRequests()},
			{"maxRequestsPerConnection", h.GetMaxRequestsPerConnection()}, {"maxRetries", h.GetMaxRetries()},
		} {
			if n.n < 0 {
				c.add(f+".connectionPool.http."+n.name, n.n, "must not be negative")
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

func (c *checker) serviceEntry(se *apinet.ServiceEntry) {
	if len(se.GetHosts()) == 0 {
		c.add("spec.hosts", "[]", "at least one host required")
	}
	dnsWithoutEndpoints := se.GetResolution() == apinet.ServiceEntry_DNS && len(se.GetEndpoints()) == 0
	for i, h := range se.GetHosts() {
		f := fmt.Sprintf("spec.hosts[%d]", i)
		switch {
		case h == "" || h == "*" || strings.Contains(h, "/"):
			c.add(f, h, "not a host name")
		case !c.webhook(): // istiod needs no more
		case !c.host(f, h, true): // reported
		case dnsWithoutEndpoints && strings.HasPrefix(h, "*"):
			c.add(f, h, "a wildcard host cannot be resolved by DNS without endpoints")
		}
	}
	for i, a := range se.GetAddresses() {
		c.ipOrCIDR(fmt.Sprintf("spec.addresses[%d]", i), a)
	}
	if c.webhook() {
		c.exportTo("spec.exportTo", se.GetExportTo())
	}
	if len(se.GetPorts()) == 0 {
		c.add("spec.ports", "[]", "at least one port required")
	}
	names := map[string]bool{}
	for i, p := range se.GetPorts() {
		f := fmt.Sprintf("spec.ports[%d]", i)
		c.port(f+".number", int64(p.GetNumber()))
		c.optPort(f+".targetPort", p.GetTargetPort())
		if p.GetName() == "" {
			c.add(f+".name", `""`, "required")
		} else if names[p.GetName()] {
			c.add(f+".name", p.GetName(), "duplicate port name")
		}
		names[p.GetName()] = true
		if c.webhook() {
			c.protocol(f+".protocol", p.GetProtocol())
		}
	}
	for i, ep := range se.GetEndpoints() {
		f := fmt.Sprintf("spec.endpoints[%d]", i)
		if ep.GetAddress() == "" {
			c.add(f+".address", `""`, "required")
		} else if _, err := netip.ParseAddr(ep.GetAddress()); err != nil && se.GetResolution() == apinet.ServiceEntry_STATIC {
			c.add(f+".address", ep.GetAddress(), "not an IP address (resolution STATIC)")
		}
		for _, name := range sortedKeys(ep.GetPorts()) {
			pf := f + ".ports[" + name + "]"
			n := ep.GetPorts()[name]
			c.port(pf, int64(n))
			if n >= 1 && n <= 65535 && c.webhook() && !names[name] {
				c.add(pf, name, "not a port name of this ServiceEntry")
			}
		}
		if c.webhook() {
			c.labels(f+".labels", ep.GetLabels())
			if w := ep.GetWeight(); w > 1<<24 {
				c.add(f+".weight", w, "too large")
			}
		}
	}
	if se.GetResolution() == apinet.ServiceEntry_STATIC && len(se.GetEndpoints()) == 0 && se.GetWorkloadSelector() == nil {
		c.add("spec.endpoints", "[]", "resolution STATIC needs endpoints or a workloadSelector")
	}
	if sel := se.GetWorkloadSelector(); sel != nil && c.webhook() {
		c.labels("spec.workloadSelector.labels", sel.GetLabels())
		if len(se.GetEndpoints()) > 0 {
			c.add("spec.workloadSelector", "{...}", "only one of workloadSelector and endpoints")
		}
	}
}

func (c *checker) workloadEntry(we *apinet.WorkloadEntry) {
	if we.GetAddress() == "" {
		c.add("spec.address", `""`, "required")
	}
}

func (c *checker) sidecar(sc *apinet.Sidecar) {
	if c.webhook() {
		if sel := sc.GetWorkloadSelector(); sel != nil {
			c.labels("spec.workloadSelector.labels", sel.GetLabels())
		}
		for i, in := range sc.GetIngress() {
			c.sidecarIngress(fmt.Sprintf("spec.ingress[%d]", i), in)
		}
	}
	for i, eg := range sc.GetEgress() {
		f := fmt.Sprintf("spec.egress[%d]", i)
		if p := eg.GetPort(); p != nil && c.webhook() {
			c.port(f+".port.number", int64(p.GetNumber()))
			c.protocol(f+".port.protocol", p.GetProtocol())
		}
		if len(eg.GetHosts()) == 0 {
			c.add(f+".hosts", "[]", "at least one host required")
		}
		for j, h := range eg.GetHosts() {
			hf := fmt.Sprintf("%s.hosts[%d]", f, j)
			ns, host, ok := strings.Cut(h, "/")
			switch {
			case !ok || ns == "" || host == "":
				c.add(hf, h, `want "namespace/host" ("./*", "istio-system/*")`)
			case !c.webhook(): // istiod needs no more
			case ns != "." && ns != "*" && ns != "~" && len(validation.IsDNS1123Label(ns)) > 0:
				c.add(hf, h, `namespace must be ".", "*", "~" or a namespace name`)
			default:
				c.host(hf, host, true)
			}
		}
	}
}

func (c *checker) sidecarIngress(f string, in *apinet.IstioIngressListener) {
	if in.GetPort() == nil {
		c.add(f+".port", "null", "required")
	} else {
		c.port(f+".port.number", int64(in.GetPort().GetNumber()))
		c.protocol(f+".port.protocol", in.GetPort().GetProtocol())
	}
	if ep := in.GetDefaultEndpoint(); ep != "" && !strings.HasPrefix(ep, "unix://") {
		host, port, err := splitHostPort(ep)
		if err != nil || (host != "127.0.0.1" && host != "0.0.0.0" && host != "[::1]" && host != "[::]") || port < 1 || port > 65535 {
			c.add(f+".defaultEndpoint", ep, "want 127.0.0.1:PORT, 0.0.0.0:PORT, [::1]:PORT, [::]:PORT or unix://PATH")
		}
	}
}
