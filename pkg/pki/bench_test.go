package pki

import (
	"crypto"
	"io"
	"net/url"
	"testing"
	"time"
)

// fixedSigner signs with a constant fake signature, so that
// BenchmarkIssueLeafDER/encode measures the encoding alone.
type fixedSigner struct{ crypto.Signer }

func (fixedSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return make([]byte, 72), nil
}

// BenchmarkIssueLeafDER measures issuing a workload leaf for an ECDSA
// P-256 key with an ECDSA P-256 CA: "sign" is the whole call, "encode" the
// same with the signature itself replaced by a constant.
func BenchmarkIssueLeafDER(b *testing.B) {
	now := time.Now()
	_, inter := newCA(b, now)
	pub := mustKey(b, ECDSAP256).Public()
	u, _ := url.Parse("spiffe://cluster.local/ns/default/sa/app")
	opts := LeafOptions{URIs: []*url.URL{u}, NotBefore: now, TTL: time.Hour}
	fake := *inter
	fake.Key = fixedSigner{inter.Key}
	for _, bc := range []struct {
		name string
		is   *Issuer
	}{{"sign", inter}, {"encode", &fake}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.is.IssueLeafDER(pub, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseCSR measures parsing and checking a workload's ECDSA
// P-256 CSR, its signature check included.
func BenchmarkParseCSR(b *testing.B) {
	u, _ := url.Parse("spiffe://cluster.local/ns/default/sa/app")
	csr, err := CreateCSR(mustKey(b, ECDSAP256), CSROptions{URIs: []*url.URL{u}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCSR(csr); err != nil {
			b.Fatal(err)
		}
	}
}
