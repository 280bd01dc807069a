package ca

import (
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/pki"
)

// rawToken signs arbitrary header and claims with an ES256 or RS256 key;
// the header's alg is the key's unless the header names one.
func rawToken(t testing.TB, key crypto.Signer, header, claims map[string]any) string {
	t.Helper()
	alg, err := algFor(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := header["alg"]; !ok {
		header["alg"] = alg
	}
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	signing := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sig, err := jwsSign(key, alg, signing)
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func mustPublicPEM(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestJWTAuthenticator(t *testing.T) {
	ec, _ := pki.GenerateKey(pki.ECDSAP256)
	rsaKey, _ := pki.GenerateKey(pki.RSA2048)
	other, _ := pki.GenerateKey(pki.ECDSAP256)
	const iss = "https://kubernetes.default.svc"
	now := time.Now()
	a, err := NewJWTAuthenticator(JWTConfig{Issuer: iss, Keys: []crypto.PublicKey{ec.Public(), rsaKey.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": iss, "aud": []string{"api", "istio-ca"}, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix(),
			"sub":           "system:serviceaccount:ns1:sa1",
			"kubernetes.io": map[string]any{"namespace": "ns1", "serviceaccount": map[string]any{"name": "sa1", "uid": "u"}},
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := rawToken(t, ec, map[string]any{}, claims(nil))
	parts := strings.Split(good, ".")
	tests := []struct {
		name, token, want string
	}{
		{"ES256", good, ""},
		{"RS256", rawToken(t, rsaKey, map[string]any{"kid": "k"}, claims(nil)), ""},
		{"aud string", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["aud"] = "istio-ca" })), ""},
		{"fractional dates", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["exp"] = float64(now.Add(time.Hour).Unix()) + 0.5 })), ""},
		{"no sub", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { delete(c, "sub") })), ""},
		{"alg none", parts[0][:0] + base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".", `algorithm "none" is not allowed`},
		{"HS256", rawToken(t, ec, map[string]any{"alg": "HS256"}, claims(nil)), `algorithm "HS256" is not allowed`},
		{"alg and key mismatch", rawToken(t, ec, map[string]any{"alg": "RS256"}, claims(nil)), "does not verify"},
		{"untrusted key", rawToken(t, other, map[string]any{}, claims(nil)), "does not verify"},
		{"tampered claims", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"x"}`)) + "." + parts[2], "does not verify"},
		{"crit header", rawToken(t, ec, map[string]any{"crit": []string{"b64"}}, claims(nil)), "critical"},
		{"wrong issuer", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["iss"] = "evil" })), `issuer "evil"`},
		{"wrong audience", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["aud"] = []string{"api"} })), "audiences [api]"},
		{"bad audience type", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["aud"] = 5 })), "aud is neither"},
		{"no exp", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { delete(c, "exp") })), "no expiry"},
		{"expired", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Second).Unix() })), "expired"},
		{"not yet valid", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), "not valid before"},
		{"issued in the future", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() })), "issued in the future"},
		{"no kubernetes claim", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { delete(c, "kubernetes.io") })), "kubernetes.io"},
		{"sub disagrees", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) { c["sub"] = "system:serviceaccount:ns1:admin" })), "disagrees"},
		{"bad namespace", rawToken(t, ec, map[string]any{}, claims(func(c map[string]any) {
			c["kubernetes.io"] = map[string]any{"namespace": "a/b", "serviceaccount": map[string]any{"name": "sa1"}}
			delete(c, "sub")
		})), "namespace"},
		{"two parts", parts[0] + "." + parts[1], "3 parts"},
		{"bad base64", "!!." + parts[1] + "." + parts[2], "token header"},
		{"huge", strings.Repeat("a", maxToken+1), "limit"},
	}
	uncached, err := NewJWTAuthenticator(JWTConfig{Issuer: iss, Keys: []crypto.PublicKey{ec.Public(), rsaKey.Public()}, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Twice with the cache (the second time a good token comes
			// from it) and once without: the same answer every time.
			for i, a := range []*JWTAuthenticator{a, a, uncached} {
				id, err := a.Verify(tt.token)
				if tt.want == "" {
					if err != nil {
						t.Fatalf("call %d: %v", i+1, err)
					}
					if id.String() != "spiffe://cluster.local/ns/ns1/sa/sa1" {
						t.Errorf("call %d: identity %s", i+1, id)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("call %d: error = %v, want it to contain %q", i+1, err, tt.want)
				}
			}
		})
	}
	if n := a.cache.len(); n != 5 {
		t.Errorf("cache holds %d tokens, want the 5 good ones", n)
	}
	if _, err := NewJWTAuthenticator(JWTConfig{Keys: []crypto.PublicKey{ec.Public()}}); err == nil {
		t.Error("no issuer accepted")
	}
	p384, _ := pki.GenerateKey(pki.ECDSAP384)
	if _, err := NewJWTAuthenticator(JWTConfig{Issuer: iss, Keys: []crypto.PublicKey{p384.Public()}}); err == nil {
		t.Error("P-384 key accepted for ES256")
	}
	pemKeys := append(mustPublicPEM(t, ec), mustPublicPEM(t, rsaKey)...)
	keys, err := ParsePublicKeys(pemKeys)
	if err != nil || len(keys) != 2 {
		t.Errorf("ParsePublicKeys: %d keys, %v", len(keys), err)
	}
}

// TestJWTCacheTimes checks that a cached token is refused once it expires,
// with the error an uncached check gives, and that a token refused for its
// times is not cached.
func TestJWTCacheTimes(t *testing.T) {
	key, _ := pki.GenerateKey(pki.ECDSAP256)
	start := time.Unix(1_800_000_000, 0)
	now := start
	a, err := NewJWTAuthenticator(JWTConfig{Issuer: "iss", Keys: []crypto.PublicKey{key.Public()}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tok := func(iat, exp time.Time) string {
		tok, err := SignToken(key, TokenClaims{Issuer: "iss", Audiences: []string{DefaultAudience}, Namespace: "ns1",
			ServiceAccount: "sa1", IssuedAt: iat, Expiry: exp})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := tok(start, start.Add(time.Hour))
	if _, err := a.Verify(good); err != nil {
		t.Fatal(err)
	}
	now = start.Add(time.Hour - time.Second)
	if _, err := a.Verify(good); err != nil {
		t.Fatalf("cached token refused before its expiry: %v", err)
	}
	now = start.Add(time.Hour)
	_, err = a.Verify(good)
	if err == nil || !strings.Contains(err.Error(), "token expired at") {
		t.Fatalf("expired cached token: error = %v, want expired", err)
	}

	now = start
	early := tok(start.Add(time.Hour), start.Add(2*time.Hour))
	if _, err := a.Verify(early); err == nil || !strings.Contains(err.Error(), "not valid before") {
		t.Fatalf("token from the future: error = %v", err)
	}
	if n := a.cache.len(); n != 1 {
		t.Errorf("cache holds %d tokens, want 1 (the refused one is not cached)", n)
	}
	now = start.Add(time.Hour)
	if _, err := a.Verify(early); err != nil {
		t.Fatalf("token once valid: %v", err)
	}
}

func TestTokenCacheBound(t *testing.T) {
	c := newTokenCache(16)
	now := time.Unix(1_800_000_000, 0)
	for i := range 100 {
		c.put([32]byte{byte(i)}, verifiedToken{times: tokenTimes{Expiry: now.Add(time.Hour)}}, now)
		if n := c.len(); n > 16 {
			t.Fatalf("after %d insertions the cache holds %d tokens (limit 16)", i+1, n)
		}
	}
	if _, ok := c.get([32]byte{99}); !ok {
		t.Error("the newest token was evicted")
	}
	// Expired tokens go first.
	c = newTokenCache(4)
	for i := range 3 {
		c.put([32]byte{byte(i)}, verifiedToken{times: tokenTimes{Expiry: now.Add(time.Duration(i) * time.Minute)}}, now)
	}
	c.put([32]byte{3}, verifiedToken{times: tokenTimes{Expiry: now.Add(time.Hour)}}, now)
	c.put([32]byte{4}, verifiedToken{times: tokenTimes{Expiry: now.Add(time.Hour)}}, now.Add(90*time.Second))
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := c.get([32]byte{byte(i)}); ok != want {
			t.Errorf("token %d cached = %v, want %v", i, ok, want)
		}
	}
}
