package ca

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// maxToken bounds the size of a JWT the verifier reads.
const maxToken = 16 << 10

// JWTConfig configures a JWTAuthenticator.
type JWTConfig struct {
	// Issuer must equal the token's iss claim.
	Issuer string
	// Audiences lists accepted audiences; the token's aud must include one (istio-ca).
	Audiences []string
	// Keys verify signatures: ECDSA P-256 keys for ES256, RSA keys (2048
	// bits or more) for RS256.
	Keys []crypto.PublicKey
	// TrustDomain is the trust domain of the identities returned.
	TrustDomain string
	// Leeway tolerates clock skew for nbf and iat (1 minute); exp is exact.
	Leeway time.Duration
	// Now returns the current time (time.Now).
	Now func() time.Time
	// CacheSize bounds how many verified tokens are remembered, so that a
	// workload presenting the same token again costs no signature check
	// (DefaultJWTCacheSize when 0; negative turns the cache off). A
	// remembered token is still checked against exp, nbf and iat at every
	// call, so the cache changes no decision.
	CacheSize int
}

// DefaultJWTCacheSize is how many verified tokens a JWTAuthenticator
// remembers by default: a few hundred bytes each.
const DefaultJWTCacheSize = 4096

// JWTAuthenticator verifies, without an API server, JWTs shaped like
// Kubernetes projected service-account tokens: ES256 or RS256 signed by a
// configured key, with iss, aud, exp (required), nbf and iat, and the
// "kubernetes.io" claim naming the namespace and service account (sub, when
// present, must agree). It serves file mode and laptop runs.
type JWTAuthenticator struct {
	cfg   JWTConfig
	cache *tokenCache // nil when off
}

var _ Authenticator = (*JWTAuthenticator)(nil)

// NewJWTAuthenticator checks the configuration and returns the authenticator.
func NewJWTAuthenticator(cfg JWTConfig) (*JWTAuthenticator, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("jwt authenticator: issuer is required")
	}
	if len(cfg.Keys) == 0 {
		return nil, errors.New("jwt authenticator: no verification key")
	}
	for i, k := range cfg.Keys {
		if _, err := algFor(k); err != nil {
			return nil, fmt.Errorf("jwt authenticator: key %d: %w", i+1, err)
		}
	}
	if len(cfg.Audiences) == 0 {
		cfg.Audiences = []string{DefaultAudience}
	}
	if cfg.TrustDomain == "" {
		cfg.TrustDomain = spiffe.DefaultTrustDomain
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultJWTCacheSize
	}
	// The cache is sound only while the keys stay those the tokens were
	// checked with: keep a copy the caller cannot change.
	cfg.Keys = slices.Clone(cfg.Keys)
	cfg.Audiences = slices.Clone(cfg.Audiences)
	a := &JWTAuthenticator{cfg: cfg}
	if cfg.CacheSize > 0 {
		a.cache = newTokenCache(cfg.CacheSize)
	}
	return a, nil
}

// ParsePublicKeys parses PEM public keys ("PUBLIC KEY", "RSA PUBLIC KEY")
// and certificates (their keys), e.g. the API server's
// --service-account-key-file.
func ParsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		var (
			k   any
			err error
		)
		switch block.Type {
		case "PUBLIC KEY":
			k, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			k, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var c *x509.Certificate
			if c, err = x509.ParseCertificate(block.Bytes); err == nil {
				k = c.PublicKey
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse public key %d: %w", len(keys)+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no public key in PEM data")
	}
	return keys, nil
}

// Name implements Authenticator.
func (a *JWTAuthenticator) Name() string { return "jwt" }

// Authenticate implements Authenticator.
func (a *JWTAuthenticator) Authenticate(ctx context.Context) (spiffe.ID, error) {
	tok, err := BearerToken(ctx)
	if err != nil {
		return spiffe.ID{}, err
	}
	return a.Verify(tok)
}

type jwtHeader struct {
	Alg  string   `json:"alg"`
	Kid  string   `json:"kid,omitempty"`
	Typ  string   `json:"typ,omitempty"`
	Crit []string `json:"crit,omitempty"`
}

// audience is a JWT aud claim: a string or an array of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = audience{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("aud is neither a string nor an array of strings")
	}
	*a = l
	return nil
}

// numericDate is a JWT NumericDate: seconds since the epoch, maybe fractional.
type numericDate struct{ time.Time }

func (d *numericDate) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("date %s is not a number", b)
	}
	if math.IsNaN(f) || f < 0 || f > 1<<40 {
		return fmt.Errorf("date %s is out of range", b)
	}
	sec, frac := math.Modf(f)
	d.Time = time.Unix(int64(sec), int64(frac*1e9))
	return nil
}

func (d numericDate) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Unix())
}

type k8sRef struct {
	Name string `json:"name"`
	UID  string `json:"uid,omitempty"`
}

type k8sClaims struct {
	Namespace      string  `json:"namespace"`
	ServiceAccount *k8sRef `json:"serviceaccount,omitempty"`
	Pod            *k8sRef `json:"pod,omitempty"`
}

type jwtClaims struct {
	Issuer     string       `json:"iss"`
	Subject    string       `json:"sub,omitempty"`
	Audience   audience     `json:"aud"`
	Expiry     *numericDate `json:"exp"`
	NotBefore  *numericDate `json:"nbf,omitempty"`
	IssuedAt   *numericDate `json:"iat,omitempty"`
	Kubernetes *k8sClaims   `json:"kubernetes.io,omitempty"`
}

// Verify checks a token and returns the identity it carries. A token
// verified before (same bytes, so same signature, issuer, audience and
// identity) is taken from the cache and only its times are checked again.
func (a *JWTAuthenticator) Verify(token string) (spiffe.ID, error) {
	if len(token) > maxToken {
		return spiffe.ID{}, fmt.Errorf("token is %d bytes (limit %d)", len(token), maxToken)
	}
	if a.cache == nil {
		id, _, err := a.verify(token)
		return id, err
	}
	key := sha256.Sum256([]byte(token))
	if v, ok := a.cache.get(key); ok {
		if err := a.checkTimes(v.times); err != nil {
			return spiffe.ID{}, err
		}
		return v.id, nil
	}
	id, times, err := a.verify(token)
	if err != nil {
		return spiffe.ID{}, err
	}
	a.cache.put(key, verifiedToken{id: id, times: times}, a.cfg.Now())
	return id, nil
}

// tokenTimes are a token's time claims; NotBefore and IssuedAt are zero
// when absent.
type tokenTimes struct {
	Expiry, NotBefore, IssuedAt time.Time
}

// checkTimes checks a token's time claims against now, as verify does and
// in the same order, with the same errors.
func (a *JWTAuthenticator) checkTimes(t tokenTimes) error {
	now := a.cfg.Now()
	switch {
	case !now.Before(t.Expiry):
		return fmt.Errorf("token expired at %s", t.Expiry.UTC().Format(time.RFC3339))
	case !t.NotBefore.IsZero() && now.Add(a.cfg.Leeway).Before(t.NotBefore):
		return fmt.Errorf("token not valid before %s", t.NotBefore.UTC().Format(time.RFC3339))
	case !t.IssuedAt.IsZero() && now.Add(a.cfg.Leeway).Before(t.IssuedAt):
		return fmt.Errorf("token issued in the future (%s)", t.IssuedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// verify checks a token completely: its form, its signature and every
// claim.
func (a *JWTAuthenticator) verify(token string) (spiffe.ID, tokenTimes, error) {
	var none tokenTimes
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return spiffe.ID{}, none, errors.New("token is not a JWS compact serialization (want 3 parts)")
	}
	var hdr jwtHeader
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return spiffe.ID{}, none, fmt.Errorf("token header: %w", err)
	}
	if len(hdr.Crit) > 0 {
		return spiffe.ID{}, none, fmt.Errorf("token header has unsupported critical parameters %v", hdr.Crit)
	}
	if hdr.Alg != "ES256" && hdr.Alg != "RS256" {
		return spiffe.ID{}, none, fmt.Errorf("token algorithm %q is not allowed (ES256, RS256)", hdr.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return spiffe.ID{}, none, fmt.Errorf("token signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	verified := false
	for _, k := range a.cfg.Keys {
		if alg, _ := algFor(k); alg == hdr.Alg && verifySig(k, digest[:], sig) {
			verified = true
			break
		}
	}
	if !verified {
		return spiffe.ID{}, none, errors.New("token signature does not verify with any trusted key")
	}
	var c jwtClaims
	if err := decodeSegment(parts[1], &c); err != nil {
		return spiffe.ID{}, none, fmt.Errorf("token claims: %w", err)
	}
	switch {
	case c.Issuer != a.cfg.Issuer:
		return spiffe.ID{}, none, fmt.Errorf("token issuer %q is not %q", c.Issuer, a.cfg.Issuer)
	case !slices.ContainsFunc(c.Audience, func(s string) bool { return slices.Contains(a.cfg.Audiences, s) }):
		return spiffe.ID{}, none, fmt.Errorf("token audiences %v do not include %v", []string(c.Audience), a.cfg.Audiences)
	case c.Expiry == nil:
		return spiffe.ID{}, none, errors.New("token has no expiry (exp)")
	}
	times := tokenTimes{Expiry: c.Expiry.Time}
	if c.NotBefore != nil {
		times.NotBefore = c.NotBefore.Time
	}
	if c.IssuedAt != nil {
		times.IssuedAt = c.IssuedAt.Time
	}
	if err := a.checkTimes(times); err != nil {
		return spiffe.ID{}, none, err
	}
	if c.Kubernetes == nil || c.Kubernetes.ServiceAccount == nil {
		return spiffe.ID{}, none, errors.New(`token has no "kubernetes.io" service account claim`)
	}
	id, err := spiffe.New(a.cfg.TrustDomain, c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name)
	if err != nil {
		return spiffe.ID{}, none, fmt.Errorf("token: %w", err)
	}
	if c.Subject != "" {
		if want := "system:serviceaccount:" + id.Namespace + ":" + id.ServiceAccount; c.Subject != want {
			return spiffe.ID{}, none, fmt.Errorf("token subject %q disagrees with its kubernetes.io claim (%s)", c.Subject, want)
		}
	}
	return id, times, nil
}

func decodeSegment(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// algFor returns the JWS algorithm a key verifies.
func algFor(k crypto.PublicKey) (string, error) {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("ECDSA curve %s is not supported (ES256 needs P-256)", k.Curve.Params().Name)
		}
		return "ES256", nil
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return "", fmt.Errorf("RSA key of %d bits is too small", k.N.BitLen())
		}
		return "RS256", nil
	}
	return "", fmt.Errorf("key type %T is not supported (ECDSA P-256, RSA)", k)
}

func verifySig(k crypto.PublicKey, digest, sig []byte) bool {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if len(sig) != 64 {
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k, digest, r, s)
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest, sig) == nil
	}
	return false
}

// TokenClaims describes a service-account token to sign with SignToken.
type TokenClaims struct {
	// Issuer is the iss claim.
	Issuer string
	// Audiences is the aud claim.
	Audiences []string
	// Namespace and ServiceAccount name the identity.
	Namespace, ServiceAccount string
	// ServiceAccountUID is the service account's UID (the API server
	// checks it; JWTAuthenticator does not).
	ServiceAccountUID string
	// PodName and PodUID optionally bind the token to a pod.
	PodName, PodUID string
	// IssuedAt is iat and nbf; Expiry is exp.
	IssuedAt, Expiry time.Time
	// KeyID is the header's kid, if any.
	KeyID string
}

// SignToken returns a JWT shaped like a Kubernetes projected
// service-account token, signed ES256 (P-256 key) or RS256 (RSA key). It is
// how file mode and tests mint tokens that JWTAuthenticator accepts.
func SignToken(key crypto.Signer, c TokenClaims) (string, error) {
	alg, err := algFor(key.Public())
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	iat, exp := numericDate{c.IssuedAt}, numericDate{c.Expiry}
	claims := jwtClaims{
		Issuer:    c.Issuer,
		Subject:   "system:serviceaccount:" + c.Namespace + ":" + c.ServiceAccount,
		Audience:  c.Audiences,
		Expiry:    &exp,
		NotBefore: &iat,
		IssuedAt:  &iat,
		Kubernetes: &k8sClaims{
			Namespace:      c.Namespace,
			ServiceAccount: &k8sRef{Name: c.ServiceAccount, UID: c.ServiceAccountUID},
		},
	}
	if c.PodName != "" {
		claims.Kubernetes.Pod = &k8sRef{Name: c.PodName, UID: c.PodUID}
	}
	hdr, err := json.Marshal(jwtHeader{Alg: alg, Kid: c.KeyID, Typ: "JWT"})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(body)
	sig, err := jwsSign(key, alg, signing)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// jwsSign signs the JWS signing input with SHA-256: PKCS #1 v1.5 for
// RS256, r||s (32 bytes each) for ES256.
func jwsSign(key crypto.Signer, alg, signing string) ([]byte, error) {
	digest := sha256.Sum256([]byte(signing))
	sig, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return nil, err
	}
	if alg != "ES256" {
		return sig, nil
	}
	var rs struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(sig, &rs); err != nil {
		return nil, err
	}
	raw := make([]byte, 64)
	rs.R.FillBytes(raw[:32])
	rs.S.FillBytes(raw[32:])
	return raw, nil
}
