package ca

import (
	"context"
	"crypto"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	pb "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/pki"
	"github.com/skiff-mesh/skiff/pkg/spiffe"
)

// staticAuth proves one identity for every call.
type staticAuth spiffe.ID

func (a staticAuth) Name() string { return "static" }
func (a staticAuth) Authenticate(context.Context) (spiffe.ID, error) {
	return spiffe.ID(a), nil
}

// FuzzCreateCertificate feeds arbitrary request bytes (the wire form of
// IstioCertificateRequest) to the service for a caller proving
// default/app: it must never panic, answer only OK, InvalidArgument or
// PermissionDenied, and sign only for exactly the proved identity within
// the maximum lifetime.
func FuzzCreateCertificate(f *testing.F) {
	id := mustID(f, "default", "app")
	// Logs go nowhere: the fuzz target may not use f's logger.
	c, err := New(context.Background(), Config{
		SelfSignedDir:            f.TempDir(),
		Authenticators:           []Authenticator{staticAuth(id)},
		DisableCertAuthenticator: true,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	svc := &service{ca: c}
	// An RSA CSR made ahead of time, so workers start fast. Run with
	// -fuzzminimizetime 1s: minimizing each new RSA input otherwise takes
	// the default 60 s, with no executions counted meanwhile.
	rsaCSR, err := os.ReadFile("testdata/rsa2048.csr")
	if err != nil {
		f.Fatal(err)
	}
	_, ecCSR := newCSR(f, pki.ECDSAP256, appID)
	_, adminCSR := newCSR(f, pki.ECDSAP256, "spiffe://cluster.local/ns/default/sa/admin")
	for _, seed := range []struct {
		csr      string
		validity int64
	}{
		{ecCSR, 3600},
		{string(rsaCSR), 0},
		{adminCSR, 60},
		{ecCSR, -1},
	} {
		b, err := proto.Marshal(&pb.IstioCertificateRequest{Csr: seed.csr, ValidityDuration: seed.validity})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\x0a\x05hello\x18\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &pb.IstioCertificateRequest{}
		if err := proto.Unmarshal(data, req); err != nil {
			return
		}
		resp, err := svc.CreateCertificate(context.Background(), req)
		switch status.Code(err) {
		case codes.OK:
		case codes.InvalidArgument, codes.PermissionDenied:
			return
		default:
			t.Fatalf("unexpected error %v", err)
		}
		leaf, _, _ := parseChain(t, resp.CertChain)
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != appID || len(leaf.DNSNames) != 0 || len(leaf.IPAddresses) != 0 {
			t.Fatalf("signed for %v %v %v", leaf.URIs, leaf.DNSNames, leaf.IPAddresses)
		}
		if life := leaf.NotAfter.Sub(leaf.NotBefore); life > DefaultMaxTTL+pki.ClockSkew {
			t.Fatalf("lifetime %v over the maximum", life)
		}
	})
}

// FuzzJWTVerify checks the token verifier never panics and accepts no
// token it did not see signed.
func FuzzJWTVerify(f *testing.F) {
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		f.Fatal(err)
	}
	a, err := NewJWTAuthenticator(JWTConfig{Issuer: "iss", Keys: []crypto.PublicKey{key.Public()}})
	if err != nil {
		f.Fatal(err)
	}
	good, err := SignToken(key, TokenClaims{Issuer: "iss", Audiences: []string{"istio-ca"}, Namespace: "ns", ServiceAccount: "sa",
		IssuedAt: time.Now(), Expiry: time.Now().Add(24 * time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := a.Verify(tok)
		if err != nil {
			return
		}
		// Only the seed's signing input verifies; base64 may be spelled
		// differently in unused trailing bits, so compare what was signed.
		if strings.Join(strings.Split(tok, ".")[:2], ".") != strings.Join(strings.Split(good, ".")[:2], ".") {
			t.Fatalf("accepted a token that was never signed: %q -> %s", tok, id)
		}
	})
}
