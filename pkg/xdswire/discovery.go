package xdswire

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// Any is a google.protobuf.Any: an encoded message and the URL of its type.
type Any struct {
	// TypeURL is type_url (field 1).
	TypeURL string
	// Value is value (field 2), the encoded message. When decoded it aliases
	// the input.
	Value []byte
}

// unmarshal merges the encoded Any b into a.
func (a *Any) unmarshal(b []byte) error {
	return rangeFields("Any", b, func(f *field) error {
		var err error
		switch f.num {
		case 1:
			a.TypeURL, err = f.str("Any", "type_url")
		case 2:
			a.Value, err = f.bytes("Any", "value")
		}
		return err
	})
}

// appendTo appends the fields of a to b.
func (a *Any) appendTo(b []byte) []byte {
	b = appendString(b, 1, a.TypeURL)
	if len(a.Value) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, a.Value)
	}
	return b
}

// Marshal encodes a.
func (a *Any) Marshal() []byte { return a.appendTo(nil) }

// Status is a google.rpc.Status, as sent in an xDS NACK. Its details are
// ignored when decoding and never written.
type Status struct {
	// Code is code (field 1), a google.rpc.Code.
	Code int32
	// Message is message (field 2).
	Message string
}

// unmarshal merges the encoded Status b into s.
func (s *Status) unmarshal(b []byte) error {
	return rangeFields("Status", b, func(f *field) error {
		switch f.num {
		case 1:
			x, err := f.varint("Status", "code")
			s.Code = int32(x)
			return err
		case 2:
			var err error
			s.Message, err = f.str("Status", "message")
			return err
		}
		return nil
	})
}

// appendTo appends the fields of s to b.
func (s *Status) appendTo(b []byte) []byte {
	if s.Code != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(s.Code)))
	}
	return appendString(b, 2, s.Message)
}

// decodeStatus merges the embedded Status v into *dst, allocating it if nil.
func decodeStatus(dst **Status, v []byte) error {
	if *dst == nil {
		*dst = &Status{}
	}
	return (*dst).unmarshal(v)
}

// DiscoveryRequest is an envoy.service.discovery.v3.DiscoveryRequest,
// without its resource_locators (field 7), which are skipped when decoding.
type DiscoveryRequest struct {
	// VersionInfo is version_info (field 1).
	VersionInfo string
	// Node is node (field 2), the encoded envoy.config.core.v3.Node, or nil
	// if absent. When decoded it aliases the input (or, if the field
	// occurred more than once, is the concatenation of the occurrences,
	// which is how embedded messages merge).
	Node []byte
	// ResourceNames is resource_names (field 3).
	ResourceNames []string
	// TypeURL is type_url (field 4).
	TypeURL string
	// ResponseNonce is response_nonce (field 5).
	ResponseNonce string
	// ErrorDetail is error_detail (field 6), set when the request is a NACK.
	ErrorDetail *Status
}

// DecodeDiscoveryRequest decodes an encoded DiscoveryRequest.
func DecodeDiscoveryRequest(b []byte) (*DiscoveryRequest, error) {
	const msg = "DiscoveryRequest"
	r := &DiscoveryRequest{}
	err := rangeFields(msg, b, func(f *field) error {
		var err error
		switch f.num {
		case 1:
			r.VersionInfo, err = f.str(msg, "version_info")
		case 2:
			var v []byte
			v, err = f.bytes(msg, "node")
			r.Node = mergeRaw(r.Node, v)
		case 3:
			var s string
			s, err = f.str(msg, "resource_names")
			if err == nil {
				r.ResourceNames = append(r.ResourceNames, s)
			}
		case 4:
			r.TypeURL, err = f.str(msg, "type_url")
		case 5:
			r.ResponseNonce, err = f.str(msg, "response_nonce")
		case 6:
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

// Marshal encodes r, its fields in field-number order.
func (r *DiscoveryRequest) Marshal() []byte {
	b := appendString(nil, 1, r.VersionInfo)
	if r.Node != nil {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, r.Node)
	}
	b = appendStrings(b, 3, r.ResourceNames)
	b = appendString(b, 4, r.TypeURL)
	b = appendString(b, 5, r.ResponseNonce)
	if r.ErrorDetail != nil {
		b = appendMessage(b, 6, r.ErrorDetail.appendTo)
	}
	return b
}

// DiscoveryResponse is an envoy.service.discovery.v3.DiscoveryResponse,
// without canary, control_plane and resource_errors, which are skipped when
// decoding.
type DiscoveryResponse struct {
	// VersionInfo is version_info (field 1).
	VersionInfo string
	// Resources is resources (field 2).
	Resources []Any
	// TypeURL is type_url (field 4).
	TypeURL string
	// Nonce is nonce (field 5).
	Nonce string
}

// DecodeDiscoveryResponse decodes an encoded DiscoveryResponse.
func DecodeDiscoveryResponse(b []byte) (*DiscoveryResponse, error) {
	const msg = "DiscoveryResponse"
	r := &DiscoveryResponse{}
	err := rangeFields(msg, b, func(f *field) error {
		var err error
		switch f.num {
		case 1:
			r.VersionInfo, err = f.str(msg, "version_info")
		case 2:
			if err = f.wantType(msg, "resources", protowire.BytesType); err == nil {
				var a Any
				err = a.unmarshal(f.v)
				r.Resources = append(r.Resources, a)
			}
		case 4:
			r.TypeURL, err = f.str(msg, "type_url")
		case 5:
			r.Nonce, err = f.str(msg, "nonce")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Marshal encodes r, its fields in field-number order.
func (r *DiscoveryResponse) Marshal() []byte {
	b := appendString(nil, 1, r.VersionInfo)
	for i := range r.Resources {
		b = appendMessage(b, 2, r.Resources[i].appendTo)
	}
	b = appendString(b, 4, r.TypeURL)
	return appendString(b, 5, r.Nonce)
}
