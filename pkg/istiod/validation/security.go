package validation

import (
	"slices"
	"strconv"

	apisec "istio.io/api/security/v1beta1"
)

// peerAuthentication is checked for the webhook only; istiod's registries
// do not read PeerAuthentication.
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
		c.port(f, int64(p))
		if pa.GetPortLevelMtls()[p] == nil {
			c.add(f, "null", "mode required")
		}
	}
}
