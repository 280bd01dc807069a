package xdswire

import "google.golang.org/protobuf/encoding/protowire"

// CertificateRequest is an istio.v1.auth.IstioCertificateRequest, the
// request of the Istio CA's CreateCertificate, without its metadata.
type CertificateRequest struct {
	// CSR is csr (field 1), the PEM certificate signing request.
	CSR string
	// ValidityDuration is validity_duration (field 3), the requested
	// lifetime in seconds.
	ValidityDuration int64
}

// Marshal encodes r, its fields in field-number order.
func (r *CertificateRequest) Marshal() []byte {
	b := appendString(nil, 1, r.CSR)
	if r.ValidityDuration != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(r.ValidityDuration))
	}
	return b
}

// DecodeCertificateResponse decodes an encoded
// istio.v1.auth.IstioCertificateResponse and returns its cert_chain (field
// 1): the PEM certificates, the signed one first.
func DecodeCertificateResponse(b []byte) (chain []string, err error) {
	const msg = "IstioCertificateResponse"
	err = rangeFields(msg, b, func(f *field) error {
		if f.num != 1 {
			return nil
		}
		s, err := f.str(msg, "cert_chain")
		if err == nil {
			chain = append(chain, s)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return chain, nil
}
