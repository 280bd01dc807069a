package xdswire_test

import (
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// decoders runs every decoder of the package on b and returns its error.
var decoders = map[string]func(b []byte) error{
	"DiscoveryRequest": func(b []byte) error { _, err := xdswire.DecodeDiscoveryRequest(b); return err },
	"DiscoveryResponse": func(b []byte) error {
		_, err := xdswire.DecodeDiscoveryResponse(b)
		return err
	},
	"DeltaDiscoveryRequest": func(b []byte) error {
		_, err := xdswire.DecodeDeltaDiscoveryRequest(b)
		return err
	},
	"DeltaDiscoveryResponse": func(b []byte) error {
		_, err := xdswire.DecodeDeltaDiscoveryResponse(b)
		return err
	},
	"IstioCertificateResponse": func(b []byte) error {
		_, err := xdswire.DecodeCertificateResponse(b)
		return err
	},
	"HealthCheckResponse": func(b []byte) error {
		_, err := xdswire.DecodeHealthCheckResponse(b)
		return err
	},
}

// TestDecodeErrors checks that errors name the message and field. (The
// errors of protowire itself start with "proto:" and a space that is
// sometimes a non-breaking one, so only their end is matched.)
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		msg  string
		in   []byte
		want string
	}{
		{"DiscoveryRequest", []byte{0x08, 0x01}, "DiscoveryRequest.version_info (field 1): wire type varint, want bytes"},
		{"DiscoveryRequest", []byte{0x15, 0, 0, 0, 0}, "DiscoveryRequest.node (field 2): wire type fixed32, want bytes"},
		{"DiscoveryRequest", []byte{0x19, 0, 0, 0, 0, 0, 0, 0, 0}, "DiscoveryRequest.resource_names (field 3): wire type fixed64"},
		{"DiscoveryRequest", []byte{0x33, 0x34}, "DiscoveryRequest.error_detail (field 6): wire type group"},
		{"DiscoveryRequest", []byte{0x32, 0x02, 0x10, 0x00}, "Status.message (field 2): wire type varint"},
		{"DiscoveryRequest", []byte{0x32, 0x02, 0x0a, 0x00}, "Status.code (field 1): wire type bytes, want varint"},
		{"DiscoveryRequest", []byte{0x22, 0x05, 'a'}, "DiscoveryRequest: field 4: unexpected EOF"},
		{"DiscoveryRequest", []byte{0x22}, "DiscoveryRequest: field 4: unexpected EOF"},
		{"DiscoveryRequest", []byte{0x80}, "DiscoveryRequest: field tag: unexpected EOF"},
		{"DiscoveryRequest", []byte{0x00}, "invalid field number"},
		{"DiscoveryRequest", []byte{0xfc, 0x01}, "mismatching end group marker"},
		{"DiscoveryRequest", []byte{0xfb, 0x01}, "field 31: unexpected EOF"},
		{"DiscoveryRequest", []byte{0xfe, 0x01}, "cannot parse reserved wire type"},
		{"DiscoveryResponse", []byte{0x12, 0x02, 0x10, 0x01}, "Any.value (field 2): wire type varint"},
		{"DiscoveryResponse", []byte{0x10, 0x01}, "DiscoveryResponse.resources (field 2): wire type varint"},
		{"DiscoveryResponse", []byte{0x2d, 0, 0, 0, 0}, "DiscoveryResponse.nonce"},
		{"DeltaDiscoveryRequest", []byte{0x2a, 0x02, 0x08, 0x00}, "DeltaDiscoveryRequest.initial_resource_versions.key (field 1): wire type varint"},
		{"DeltaDiscoveryRequest", []byte{0x2a, 0x03, 0x12, 0x05, 'a'}, "initial_resource_versions: field 2: unexpected EOF"},
		{"DeltaDiscoveryRequest", []byte{0x18, 0x01}, "DeltaDiscoveryRequest.resource_names_subscribe"},
		{"DeltaDiscoveryRequest", []byte{0x3a, 0x01, 0x08}, "Status: field 1: unexpected EOF"},
		{"DeltaDiscoveryResponse", []byte{0x12, 0x02, 0x10, 0x00}, "Resource.resource (field 2): wire type varint"},
		{"DeltaDiscoveryResponse", []byte{0x12, 0x04, 0x12, 0x02, 0x08, 0x00}, "Any.type_url (field 1): wire type varint"},
		{"DeltaDiscoveryResponse", []byte{0x12, 0x02, 0x18, 0x00}, "Resource.name (field 3)"},
		{"DeltaDiscoveryResponse", []byte{0x30, 0x00}, "DeltaDiscoveryResponse.removed_resources (field 6)"},
		{"IstioCertificateResponse", []byte{0x08, 0x00}, "IstioCertificateResponse.cert_chain (field 1): wire type varint"},
		{"IstioCertificateResponse", []byte{0x0a, 0x01}, "IstioCertificateResponse: field 1: unexpected EOF"},
		{"HealthCheckResponse", []byte{0x0a, 0x00}, "HealthCheckResponse.status (field 1): wire type bytes, want varint"},
		{"HealthCheckResponse", []byte{0x08, 0x80}, "HealthCheckResponse: field 1: unexpected EOF"},
		{"HealthCheckResponse", []byte{0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, "variable length integer overflow"},
	}
	for _, tt := range tests {
		err := decoders[tt.msg](tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("decode %s %x: %v; want error containing %q", tt.msg, tt.in, err, tt.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "xdswire: decode ") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
}

// TestDecodeTruncated cuts valid encodings of every message at every length:
// a decoder fails or, where the cut falls between fields, succeeds, and never
// panics. Without its last byte, the last field is always cut short.
func TestDecodeTruncated(t *testing.T) {
	for name, in := range seeds(t) {
		decode := decoders[name]
		for _, b := range in {
			for n := range len(b) {
				err := decode(b[:n])
				if n == len(b)-1 && err == nil {
					t.Errorf("%s %x without its last byte decoded", name, b)
				}
			}
		}
	}
}
