package xdswire_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	security "istio.io/api/security/v1alpha1"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// checkEncoding checks that b decodes, with the generated type of want, to
// want and is the deterministic generated encoding of want.
func checkEncoding(t *testing.T, b []byte, want proto.Message) {
	t.Helper()
	got := want.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("marshaled\n%v\nwant\n%v", got, want)
	}
	if wantb := marshal(t, want); !bytes.Equal(b, wantb) {
		t.Errorf("marshaled %x\nwant      %x", b, wantb)
	}
}

func TestSecrets(t *testing.T) {
	chain := []byte("-----BEGIN CERTIFICATE-----\n" + strings.Repeat("MIIB", 300) + "\n-----END CERTIFICATE-----\n")
	key := []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n-----END PRIVATE KEY-----\n")
	t.Run("tls certificate", func(t *testing.T) {
		checkEncoding(t, xdswire.TLSCertificateSecret("default", chain, key), &tlsv3.Secret{
			Name: "default",
			Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
				CertificateChain: inline(chain), PrivateKey: inline(key),
			}},
		})
	})
	t.Run("empty tls certificate", func(t *testing.T) {
		checkEncoding(t, xdswire.TLSCertificateSecret("", nil, nil), &tlsv3.Secret{
			Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
				CertificateChain: inline(nil), PrivateKey: inline(nil),
			}},
		})
	})
	t.Run("validation context", func(t *testing.T) {
		checkEncoding(t, xdswire.ValidationContextSecret("ROOTCA", chain), &tlsv3.Secret{
			Name: "ROOTCA",
			Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: inline(chain),
			}},
		})
	})
	want := string((&tlsv3.Secret{}).ProtoReflect().Descriptor().FullName())
	if xdswire.SecretType != "type.googleapis.com/"+want {
		t.Errorf("SecretType = %q, want the type URL of %s", xdswire.SecretType, want)
	}
}

func TestCertificateRequest(t *testing.T) {
	for _, r := range []xdswire.CertificateRequest{
		{},
		{CSR: "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n", ValidityDuration: 86400},
		{CSR: "x", ValidityDuration: -1},
	} {
		checkEncoding(t, r.Marshal(), &security.IstioCertificateRequest{Csr: r.CSR, ValidityDuration: r.ValidityDuration})
	}
}

func TestCertificateResponse(t *testing.T) {
	for _, chain := range [][]string{nil, {"leaf"}, {"leaf", "", "root"}} {
		g := &security.IstioCertificateResponse{CertChain: chain}
		got, err := xdswire.DecodeCertificateResponse(marshal(t, g))
		if err != nil || !slices.Equal(got, chain) {
			t.Errorf("DecodeCertificateResponse = %q, %v; want %q", got, err, chain)
		}
	}
	// The request's metadata is not modeled; a response with unknown
	// fields still decodes.
	md, _ := structpb.NewStruct(map[string]any{"k": "v"})
	in := append(marshal(t, &security.IstioCertificateRequest{Metadata: md}), marshal(t, &security.IstioCertificateResponse{CertChain: []string{"a"}})...)
	if got, err := xdswire.DecodeCertificateResponse(in); err != nil || !slices.Equal(got, []string{"a"}) {
		t.Errorf("with unknown fields: %q, %v", got, err)
	}
}

func TestHealth(t *testing.T) {
	for _, svc := range []string{"", "grpc.health.v1.Health", "ünï"} {
		checkEncoding(t, xdswire.HealthCheckRequest(svc), &grpc_health_v1.HealthCheckRequest{Service: svc})
	}
	values := grpc_health_v1.HealthCheckResponse_SERVING.Descriptor().Values()
	for i := range values.Len() {
		v := values.Get(i)
		s := grpc_health_v1.HealthCheckResponse_ServingStatus(v.Number())
		got, err := xdswire.DecodeHealthCheckResponse(marshal(t, &grpc_health_v1.HealthCheckResponse{Status: s}))
		if err != nil || got != int32(s) {
			t.Errorf("decode %v = %d, %v", s, got, err)
		}
		if name := xdswire.HealthStatusName(got); name != string(v.Name()) {
			t.Errorf("HealthStatusName(%d) = %q, want %q", got, name, v.Name())
		}
	}
	if xdswire.HealthServing != int32(grpc_health_v1.HealthCheckResponse_SERVING) {
		t.Error("HealthServing is not SERVING")
	}
	// A value this package does not know, negative ones included (ten
	// byte varints).
	for _, s := range []protoreflect.EnumNumber{7, -1} {
		b := marshal(t, &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_ServingStatus(s)})
		got, err := xdswire.DecodeHealthCheckResponse(b)
		if err != nil || got != int32(s) {
			t.Errorf("decode %d = %d, %v", s, got, err)
		}
	}
	if got := xdswire.HealthStatusName(7); got != "ServingStatus(7)" {
		t.Errorf("HealthStatusName(7) = %q", got)
	}
}

func TestAny(t *testing.T) {
	for _, a := range []xdswire.Any{{}, {TypeURL: xdswire.SecretType}, {TypeURL: "t", Value: xdswire.ValidationContextSecret("ROOTCA", []byte("ca"))}} {
		checkEncoding(t, a.Marshal(), &anypb.Any{TypeUrl: a.TypeURL, Value: a.Value})
	}
}
