package grpcserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/skiff-mesh/skiff/pkg/grpcserver"
)

const spiffeID = "spiffe://cluster.local/ns/default/sa/grpcserver"

// tlsConfigs returns a server and a client configuration that trust one
// self-signed certificate, which also names spiffeID.
func tlsConfigs(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(spiffeID)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "grpcserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, URIs: []*url.URL{u},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:        true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(der)
	pool.AddCert(leaf)
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1"}
	return server, client
}

// echoService is a test service: Echo (unary) returns its request, Chat
// (bidirectional) answers every message with Repeat copies of it, and Wait
// blocks until its context ends.
type echoService struct {
	// Repeat is how many answers Chat sends per message (1 if 0).
	Repeat int
	// seen receives each handler's context.
	seen chan context.Context
}

type echoHandler interface{ echo() *echoService }

func (e *echoService) echo() *echoService { return e }

var echoDesc = grpc.ServiceDesc{
	ServiceName: "skiff.test.Echo",
	HandlerType: (*echoHandler)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			srv.(echoHandler).echo().report(ctx)
			h := func(ctx context.Context, req any) (any, error) { return req, nil }
			if icpt == nil {
				return h(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/skiff.test.Echo/Echo"}, h)
		},
	}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			e := srv.(echoHandler).echo()
			e.report(ss.Context())
			for {
				in := new(wrapperspb.BytesValue)
				if err := ss.RecvMsg(in); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				for range max(e.Repeat, 1) {
					if err := ss.SendMsg(in); err != nil {
						return err
					}
				}
			}
		}},
		{StreamName: "Wait", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(echoHandler).echo().report(ss.Context())
			<-ss.Context().Done()
			return status.FromContextError(ss.Context().Err()).Err()
		}},
	},
}

func (e *echoService) report(ctx context.Context) {
	if e.seen != nil {
		e.seen <- ctx
	}
}

// serve starts s on a loopback listener and stops it when the test ends.
func serve(t testing.TB, s *grpcserver.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; !errors.Is(err, grpcserver.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// dial connects a grpc-go client, with TLS when cfg is set.
func dial(t testing.TB, addr string, cfg *tls.Config, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

var chatDesc = &grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}

func chat(t testing.TB, ctx context.Context, cc *grpc.ClientConn) grpc.ClientStream {
	t.Helper()
	cs, err := cc.NewStream(ctx, chatDesc, "/skiff.test.Echo/Chat")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("status %v (%v), want %v", got, err, want)
	}
}
