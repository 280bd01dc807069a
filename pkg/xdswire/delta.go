package xdswire

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// DeltaDiscoveryRequest is an envoy.service.discovery.v3.DeltaDiscoveryRequest,
// without its resource locators (fields 8 and 9), which are skipped when
// decoding.
type DeltaDiscoveryRequest struct {
	// Node is node (field 1), the encoded envoy.config.core.v3.Node, or nil
	// if absent; see [DiscoveryRequest.Node] for its aliasing.
	Node []byte
	// TypeURL is type_url (field 2).
	TypeURL string
	// Subscribe is resource_names_subscribe (field 3).
	Subscribe []string
	// Unsubscribe is resource_names_unsubscribe (field 4).
	Unsubscribe []string
	// InitialResourceVersions is initial_resource_versions (field 5), from
	// resource name to version. A decoded empty map is nil.
	InitialResourceVersions map[string]string
	// ResponseNonce is response_nonce (field 6).
	ResponseNonce string
	// ErrorDetail is error_detail (field 7), set when the request is a NACK.
	ErrorDetail *Status
}

// DecodeDeltaDiscoveryRequest decodes an encoded DeltaDiscoveryRequest.
func DecodeDeltaDiscoveryRequest(b []byte) (*DeltaDiscoveryRequest, error) {
	const msg = "DeltaDiscoveryRequest"
	r := &DeltaDiscoveryRequest{}
	err := rangeFields(msg, b, func(f *field) error {
		var err error
		var s string
		switch f.num {
		case 1:
			var v []byte
			v, err = f.bytes(msg, "node")
			r.Node = mergeRaw(r.Node, v)
		case 2:
			r.TypeURL, err = f.str(msg, "type_url")
		case 3:
			if s, err = f.str(msg, "resource_names_subscribe"); err == nil {
				r.Subscribe = append(r.Subscribe, s)
			}
		case 4:
			if s, err = f.str(msg, "resource_names_unsubscribe"); err == nil {
				r.Unsubscribe = append(r.Unsubscribe, s)
			}
		case 5:
			if err = f.wantType(msg, "initial_resource_versions", protowire.BytesType); err == nil {
				err = decodeStringEntry(&r.InitialResourceVersions, msg+".initial_resource_versions", f.v)
			}
		case 6:
			r.ResponseNonce, err = f.str(msg, "response_nonce")
		case 7:
			if err = f.wantType(msg, "error_detail", protowire.BytesType); err == nil {
				err = decodeStatus(&r.ErrorDetail, f.v)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// decodeStringEntry decodes one entry of a map<string, string> field into *m,
// allocating the map if nil. A missing key or value is empty.
func decodeStringEntry(m *map[string]string, msg string, b []byte) error {
	var k, v string
	err := rangeFields(msg, b, func(f *field) error {
		var err error
		switch f.num {
		case 1:
			k, err = f.str(msg, "key")
		case 2:
			v, err = f.str(msg, "value")
		}
		return err
	})
	if err != nil {
		return err
	}
	if *m == nil {
		*m = make(map[string]string)
	}
	(*m)[k] = v
	return nil
}

// Marshal encodes r, its fields in field-number order and the map entries
// sorted by key, so the output is deterministic.
func (r *DeltaDiscoveryRequest) Marshal() []byte {
	var b []byte
	if r.Node != nil {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, r.Node)
	}
	b = appendString(b, 2, r.TypeURL)
	b = appendStrings(b, 3, r.Subscribe)
	b = appendStrings(b, 4, r.Unsubscribe)
	keys := make([]string, 0, len(r.InitialResourceVersions))
	for k := range r.InitialResourceVersions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendMessage(b, 5, func(b []byte) []byte {
			b = appendEntryString(b, 1, k)
			return appendEntryString(b, 2, r.InitialResourceVersions[k])
		})
	}
	b = appendString(b, 6, r.ResponseNonce)
	if r.ErrorDetail != nil {
		b = appendMessage(b, 7, r.ErrorDetail.appendTo)
	}
	return b
}

// Resource is an envoy.service.discovery.v3.Resource, without its aliases,
// resource_name, ttl, cache_control and metadata, which are skipped when
// decoding.
type Resource struct {
	// Name is name (field 3).
	Name string
	// Version is version (field 1).
	Version string
	// Resource is resource (field 2), nil if absent.
	Resource *Any
}

// unmarshal merges the encoded Resource b into r.
func (r *Resource) unmarshal(b []byte) error {
	const msg = "Resource"
	return rangeFields(msg, b, func(f *field) error {
		var err error
		switch f.num {
		case 1:
			r.Version, err = f.str(msg, "version")
		case 2:
			if err = f.wantType(msg, "resource", protowire.BytesType); err == nil {
				if r.Resource == nil {
					r.Resource = &Any{}
				}
				err = r.Resource.unmarshal(f.v)
			}
		case 3:
			r.Name, err = f.str(msg, "name")
		}
		return err
	})
}

// appendTo appends the fields of r to b, in field-number order.
func (r *Resource) appendTo(b []byte) []byte {
	b = appendString(b, 1, r.Version)
	if r.Resource != nil {
		b = appendMessage(b, 2, r.Resource.appendTo)
	}
	return appendString(b, 3, r.Name)
}

// DeltaDiscoveryResponse is an envoy.service.discovery.v3.DeltaDiscoveryResponse,
// without removed_resource_names, control_plane and resource_errors, which
// are skipped when decoding.
type DeltaDiscoveryResponse struct {
	// SystemVersionInfo is system_version_info (field 1).
	SystemVersionInfo string
	// Resources is resources (field 2).
	Resources []Resource
	// TypeURL is type_url (field 4).
	TypeURL string
	// RemovedResources is removed_resources (field 6).
	RemovedResources []string
	// Nonce is nonce (field 5).
	Nonce string
}

// DecodeDeltaDiscoveryResponse decodes an encoded DeltaDiscoveryResponse.
func DecodeDeltaDiscoveryResponse(b []byte) (*DeltaDiscoveryResponse, error) {
	const msg = "DeltaDiscoveryResponse"
	r := &DeltaDiscoveryResponse{}
	err := rangeFields(msg, b, func(f *field) error {
		var err error
		switch f.num {
		case 1:
			r.SystemVersionInfo, err = f.str(msg, "system_version_info")
		case 2:
			if err = f.wantType(msg, "resources", protowire.BytesType); err == nil {
				var res Resource
				err = res.unmarshal(f.v)
				r.Resources = append(r.Resources, res)
			}
		case 4:
			r.TypeURL, err = f.str(msg, "type_url")
		case 5:
			r.Nonce, err = f.str(msg, "nonce")
		case 6:
			var s string
			if s, err = f.str(msg, "removed_resources"); err == nil {
				r.RemovedResources = append(r.RemovedResources, s)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Marshal encodes r, its fields in field-number order.
func (r *DeltaDiscoveryResponse) Marshal() []byte {
	b := appendString(nil, 1, r.SystemVersionInfo)
	for i := range r.Resources {
		b = appendMessage(b, 2, r.Resources[i].appendTo)
	}
	b = appendString(b, 4, r.TypeURL)
	b = appendString(b, 5, r.Nonce)
	return appendStrings(b, 6, r.RemovedResources)
}
