// Package validation owns the field checks of the configuration istiod
// reads and the validating admission webhook admits. Each check is written
// once and belongs to one of two levels:
//
//   - Istiod: what istiod needs to use an object. Accept runs these on the
//     typed objects the registries load (core/v1 Service and Pod,
//     discovery/v1 EndpointSlice, networking.istio.io ServiceEntry,
//     WorkloadEntry, VirtualService, DestinationRule, Sidecar); an object
//     that fails is skipped and reported.
//   - Webhook: what the webhook refuses, a superset of Istiod. A Validator
//     runs these on an AdmissionReview's object: VirtualService,
//     DestinationRule, ServiceEntry, WorkloadEntry, Sidecar and
//     PeerAuthentication get field-level checks (hosts, ports, weights,
//     subsets, selectors, enums), every other kind of the Istio groups Skiff
//     knows is checked for syntax (its spec must parse, with no unknown
//     fields).
//
// Each problem is a *FieldError naming the field, the value and the reason.
//
// The package imports no other Skiff package, so model, the registries and
// the webhook can all depend on it without a cycle; model itself does not
// validate.
//
// Subset references are looked up in the DestinationRules a SubsetLookup
// knows: a VirtualService that names a subset no DestinationRule of its
// host defines is refused; a host with no DestinationRule yet is accepted,
// since the rule may be applied after the route.
//
// Whether a referenced host exists is not checked here: the webhook runs
// the analyzers (pkg/istiod/analysis) on the admitted object and returns
// their messages (IST0101 for a missing host) as admission warnings, or
// refuses a missing host when istiod runs with
// --validationDenyMissingHosts (see pkg/istiod/webhooks.go).
package validation
