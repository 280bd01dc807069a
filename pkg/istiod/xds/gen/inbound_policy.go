package gen

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	security "istio.io/client-go/pkg/apis/security/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// workloadPolicies are the security policies that apply to a workload: all
// that its inbound listener reads of it besides its ports.
type workloadPolicies struct {
	mtls  model.MTLSPolicy
	authz model.AuthorizationPolicies
	authn []*security.RequestAuthentication
}

func policiesOf(pc *model.PushContext, w model.Workload) workloadPolicies {
	return workloadPolicies{
		mtls:  pc.Security.EffectiveMTLS(w),
		authz: pc.Security.AuthorizationPoliciesFor(w),
		authn: pc.Security.RequestAuthenticationsFor(w),
	}
}

// key names the policies: the mutual TLS modes, then each policy by
// namespace and name, in the order they apply. Within one push a name
// is one object, so workloads with equal keys get equal listeners.
func (wp workloadPolicies) key() string {
	var b strings.Builder
	b.WriteString("mtls=")
	b.WriteString(strconv.Itoa(int(wp.mtls.Mode)))
	for _, port := range slices.Sorted(maps.Keys(wp.mtls.Ports)) {
		b.WriteString("," + strconv.FormatUint(uint64(port), 10) + ":" + strconv.Itoa(int(wp.mtls.Ports[port])))
	}
	for _, list := range []struct {
		action   string
		policies []*security.AuthorizationPolicy
	}{{"custom", wp.authz.Custom}, {"deny", wp.authz.Deny}, {"allow", wp.authz.Allow}, {"audit", wp.authz.Audit}} {
		for _, p := range list.policies {
			b.WriteString(" " + list.action + "=" + p.Namespace + "/" + p.Name)
		}
	}
	for _, p := range wp.authn {
		b.WriteString(" authn=" + p.Namespace + "/" + p.Name)
	}
	return b.String()
}
