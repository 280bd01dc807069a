package model

import (
	"fmt"

	apinet "istio.io/api/networking/v1alpha3"
)

func validateVirtualService(es *errs, vs *apinet.VirtualService) {
	if len(vs.GetHosts()) == 0 {
		es.add("spec.hosts", "[]", "at least one host required")
	}
	for i, h := range vs.GetHosts() {
		if h == "" {
			es.add(fmt.Sprintf("spec.hosts[%d]", i), `""`, "empty host")
		}
	}
	if len(vs.GetHttp()) == 0 && len(vs.GetTcp()) == 0 && len(vs.GetTls()) == 0 {
		es.add("spec", "{}", "http, tcp or tls routes required")
	}
	for i, r := range vs.GetHttp() {
		f := fmt.Sprintf("spec.http[%d]", i)
		if len(r.GetRoute()) == 0 && r.GetRedirect() == nil && r.GetDirectResponse() == nil {
			es.add(f+".route", "[]", "at least one destination required")
		}
		validateWeights(es, f, len(r.GetRoute()), func(j int) (*apinet.Destination, int32) {
			return r.GetRoute()[j].GetDestination(), r.GetRoute()[j].GetWeight()
		})
		for j, m := range r.GetMatch() {
			mf := fmt.Sprintf("%s.match[%d]", f, j)
			if u := m.GetUri(); u != nil && u.GetMatchType() == nil {
				es.add(mf+".uri", "{}", "one of exact, prefix or regex required")
			}
			for name, h := range m.GetHeaders() {
				if h.GetMatchType() == nil {
					es.add(mf+".headers["+name+"]", "{}", "one of exact, prefix or regex required")
				}
			}
		}
		if t := r.GetTimeout(); t != nil && (t.GetSeconds() < 0 || t.GetNanos() < 0) {
			es.add(f+".timeout", t.AsDuration(), "must not be negative")
		}
		if rt := r.GetRetries(); rt != nil && rt.GetAttempts() < 0 {
			es.add(f+".retries.attempts", rt.GetAttempts(), "must not be negative")
		}
	}
	for i, r := range vs.GetTcp() {
		f := fmt.Sprintf("spec.tcp[%d]", i)
		if len(r.GetRoute()) == 0 {
			es.add(f+".route", "[]", "at least one destination required")
		}
		validateWeights(es, f, len(r.GetRoute()), func(j int) (*apinet.Destination, int32) {
			return r.GetRoute()[j].GetDestination(), r.GetRoute()[j].GetWeight()
		})
	}
}

// validateWeights checks n destinations: each has a host, weights are in
// 0..100 and, when more than one, add up to 100.
func validateWeights(es *errs, f string, n int, get func(int) (*apinet.Destination, int32)) {
	sum := int32(0)
	for j := range n {
		d, w := get(j)
		df := fmt.Sprintf("%s.route[%d]", f, j)
		if d.GetHost() == "" {
			es.add(df+".destination.host", `""`, "required")
		}
		if p := d.GetPort().GetNumber(); p > 65535 {
			es.add(df+".destination.port.number", p, "must be in 1..65535")
		}
		if w < 0 || w > 100 {
			es.add(df+".weight", w, "must be in 0..100")
		}
		sum += w
	}
	if n > 1 && sum != 100 {
		es.add(f+".route[*].weight", sum, "weights must add up to 100")
	}
}

func validateDestinationRule(es *errs, dr *apinet.DestinationRule) {
	if dr.GetHost() == "" {
		es.add("spec.host", `""`, "required")
	}
	seen := map[string]bool{}
	for i, s := range dr.GetSubsets() {
		f := fmt.Sprintf("spec.subsets[%d]", i)
		switch {
		case s.GetName() == "":
			es.add(f+".name", `""`, "required")
		case seen[s.GetName()]:
			es.add(f+".name", s.GetName(), "duplicate subset name")
		}
		seen[s.GetName()] = true
		if len(s.GetLabels()) == 0 {
			es.add(f+".labels", "{}", "at least one label required")
		}
	}
}
