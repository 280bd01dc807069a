package main

import "github.com/skiff-mesh/skiff/pkg/pki"

// sanOf returns the first URI SAN of the first certificate in a PEM chain.
func sanOf(chain []byte) string {
	certs, err := pki.ParseCertificates(chain)
	if err != nil || len(certs) == 0 || len(certs[0].URIs) == 0 {
		return "(none)"
	}
	return certs[0].URIs[0].String()
}
