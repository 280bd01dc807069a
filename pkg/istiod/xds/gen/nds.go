package gen

import (
	"fmt"
	"slices"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"github.com/skiff-mesh/skiff/pkg/nds"
)

// nameTable lists the scope's hosts with their addresses: VIPs, or for
// headless Kubernetes services the endpoint addresses. It reads the scope's
// services alone, so the scopes that see the same ones share it.
func nameTable(pc *model.PushContext, sc *model.Scope) *Resource {
	sc = sc.Peer()
	return nameTableMemo.Get(pc, sc, func() *Resource {
		nt := &nds.NameTable{Table: map[string]*nds.NameTable_NameInfo{}}
		for _, svc := range sc.Services {
			ips := slices.Clone(svc.Addresses)
			if len(ips) == 0 && headless(svc) {
				for _, e := range pc.Endpoints[svc.Hostname] {
					if !e.DNSName && !slices.Contains(ips, e.Address) {
						ips = append(ips, e.Address)
					}
				}
			}
			if len(ips) == 0 {
				continue
			}
			ni := &nds.NameTable_NameInfo{Ips: ips, Registry: svc.Registry}
			if svc.Registry == model.RegistryKubernetes {
				ni.Shortname, ni.Namespace = svc.Name, svc.Namespace
			}
			nt.Table[svc.Hostname] = ni
		}
		// As the generated code would refuse to marshal it, a table with a
		// string that is not UTF-8 is a resource holding the error:
		// Generate fails on it.
		if err := nt.Validate(); err != nil {
			return &Resource{err: &ResourceError{Err: fmt.Errorf("marshal istio.networking.nds.v1.NameTable: %w", err)}}
		}
		return encodedResource("", nds.TypeURL, nt.Marshal())
	})
}

// headless reports whether svc is a Kubernetes service without a cluster
// IP whose endpoints clients reach directly: the name table lists their
// addresses.
func headless(svc *model.Service) bool {
	return len(svc.Addresses) == 0 && svc.Registry == model.RegistryKubernetes && svc.Resolution == model.ClientSideLB
}
