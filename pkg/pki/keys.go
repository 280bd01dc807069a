package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// KeyType is a kind of private key this package generates.
type KeyType int

const (
	// ECDSAP256 is an ECDSA key on NIST P-256, the default.
	ECDSAP256 KeyType = iota
	// RSA2048 is a 2048-bit RSA key, Istio's default for workload keys.
	RSA2048
	// RSA3072 is a 3072-bit RSA key.
	RSA3072
	// RSA4096 is a 4096-bit RSA key.
	RSA4096
	// ECDSAP384 is an ECDSA key on NIST P-384.
	ECDSAP384
)

// String returns the key type's name as ParseKeyType accepts it.
func (k KeyType) String() string {
	switch k {
	case ECDSAP256:
		return "ECDSA-P256"
	case ECDSAP384:
		return "ECDSA-P384"
	case RSA2048:
		return "RSA-2048"
	case RSA3072:
		return "RSA-3072"
	case RSA4096:
		return "RSA-4096"
	}
	return fmt.Sprintf("KeyType(%d)", int(k))
}

// ParseKeyType parses a key type name: ECDSA-P256 (or ECDSA, EC, P256),
// ECDSA-P384 (P384), RSA-2048 (or RSA), RSA-3072, RSA-4096. Case is ignored.
func ParseKeyType(s string) (KeyType, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "ECDSA-P256", "ECDSA", "EC", "P256", "P-256":
		return ECDSAP256, nil
	case "ECDSA-P384", "P384", "P-384":
		return ECDSAP384, nil
	case "RSA-2048", "RSA", "RSA2048":
		return RSA2048, nil
	case "RSA-3072", "RSA3072":
		return RSA3072, nil
	case "RSA-4096", "RSA4096":
		return RSA4096, nil
	}
	return 0, fmt.Errorf("unknown key type %q (want ECDSA-P256, ECDSA-P384, RSA-2048, RSA-3072 or RSA-4096)", s)
}

// GenerateKey returns a new private key of the given type.
func GenerateKey(k KeyType) (crypto.Signer, error) {
	var (
		key crypto.Signer
		err error
	)
	switch k {
	case ECDSAP256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ECDSAP384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case RSA2048:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case RSA3072:
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case RSA4096:
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	default:
		return nil, fmt.Errorf("generate key: unknown key type %v", k)
	}
	if err != nil {
		return nil, fmt.Errorf("generate %v key: %w", k, err)
	}
	return key, nil
}

// EncodePrivateKey returns the key as a PKCS #8 "PRIVATE KEY" PEM block.
func EncodePrivateKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKey parses the first PEM block of data as a private key in
// PKCS #8 ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1
// ("RSA PRIVATE KEY") form. The key must be an allowed type (CheckPublicKey).
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block in private key data", ErrInvalid)
	}
	if _, ok := block.Headers["DEK-Info"]; ok {
		return nil, fmt.Errorf("%w: encrypted private keys are not supported", ErrInvalid)
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%w: PEM block %q is not a private key", ErrInvalid, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: parse %s: %v", ErrInvalid, strings.ToLower(block.Type), err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: private key of type %T cannot sign", ErrInvalid, key)
	}
	if err := CheckPublicKey(signer.Public()); err != nil {
		return nil, err
	}
	return signer, nil
}

// CheckPublicKey reports whether a public key is of a type this package
// accepts in CSRs and CA certificates: ECDSA on P-256 or P-384, or RSA of
// 2048 to 4096 bits. Anything else (Ed25519, DSA, small RSA, other curves)
// is an error wrapping ErrInvalid.
func CheckPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384():
			return nil
		}
		return fmt.Errorf("%w: ECDSA curve %s is not allowed (allowed: P-256, P-384)", ErrInvalid, k.Curve.Params().Name)
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < 2048 || n > 4096 {
			return fmt.Errorf("%w: RSA key of %d bits is not allowed (allowed: 2048 to 4096)", ErrInvalid, n)
		}
		return nil
	case nil:
		return fmt.Errorf("%w: no public key", ErrInvalid)
	}
	return fmt.Errorf("%w: key type %s is not allowed (allowed: ECDSA P-256/P-384, RSA 2048-4096)", ErrInvalid, keyTypeName(pub))
}

func keyTypeName(pub crypto.PublicKey) string {
	switch fmt.Sprintf("%T", pub) {
	case "ed25519.PublicKey":
		return "Ed25519"
	case "*dsa.PublicKey":
		return "DSA"
	case "*ecdh.PublicKey":
		return "ECDH"
	}
	return fmt.Sprintf("%T", pub)
}

// KeyMatches reports whether a private key is the one for a public key.
func KeyMatches(pub crypto.PublicKey, key crypto.Signer) bool {
	p, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && p.Equal(pub)
}

// ErrInvalid is wrapped by every error caused by bad input.
var ErrInvalid = errors.New("invalid input")
