package xdswire

import "google.golang.org/protobuf/encoding/protowire"

// SecretType is the type URL of an SDS secret, the Any type of the resources
// in an SDS response.
const SecretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

// TLSCertificateSecret returns an encoded
// envoy.extensions.transport_sockets.tls.v3.Secret named name, holding a
// tls_certificate with the PEM certificate chain and private key inline.
func TLSCertificateSecret(name string, chainPEM, keyPEM []byte) []byte {
	b := appendString(nil, 1, name)
	// tls_certificate (2): certificate_chain (1), private_key (2).
	return appendMessage(b, 2, func(b []byte) []byte {
		b = appendMessage(b, 1, func(b []byte) []byte { return appendInlineBytes(b, chainPEM) })
		return appendMessage(b, 2, func(b []byte) []byte { return appendInlineBytes(b, keyPEM) })
	})
}

// ValidationContextSecret returns an encoded
// envoy.extensions.transport_sockets.tls.v3.Secret named name, holding a
// validation_context whose trusted CA certificates are caPEM, inline.
func ValidationContextSecret(name string, caPEM []byte) []byte {
	b := appendString(nil, 1, name)
	// validation_context (4): trusted_ca (1).
	return appendMessage(b, 4, func(b []byte) []byte {
		return appendMessage(b, 1, func(b []byte) []byte { return appendInlineBytes(b, caPEM) })
	})
}

// appendInlineBytes appends the fields of an envoy.config.core.v3.DataSource
// holding v as inline_bytes (2). It is a oneof member, so it is written even
// when empty.
func appendInlineBytes(b []byte, v []byte) []byte {
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}
