// Package validation checks Istio configuration the way the validating
// admission webhook must: VirtualService, DestinationRule, ServiceEntry,
// Sidecar and PeerAuthentication get field-level checks (hosts, ports,
// weights, subsets, selectors, enums), every other kind of the Istio groups
// Skiff knows is checked for syntax (its spec must parse, with no unknown
// fields). Each problem is a *model.FieldError naming the field, the value
// and the reason. The checks also include istiod's own (model.Validate), so
// the webhook refuses what istiod would otherwise skip.
//
// Subset references are looked up in the DestinationRules a SubsetLookup
// knows: a VirtualService that names a subset no DestinationRule of its
// host defines is refused; a host with no DestinationRule yet is accepted,
// since the rule may be applied after the route.
package validation
