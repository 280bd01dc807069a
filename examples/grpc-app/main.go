// Command grpc-app is the demo's proxyless gRPC application. As a server it
// answers Hello with its version; as a client it calls a mesh name through
// xDS (GRPC_XDS_BOOTSTRAP, written by pilot-agent) and prints how the calls
// were split. With --mtls it uses xDS credentials: certificates from the
// agent, TLS settings from istiod.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// hello is the demo's one RPC, described by hand so the example needs no
// generated code: StringValue in, StringValue out.
var hello = grpc.ServiceDesc{
	ServiceName: "skiff.demo.Greeter",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Hello", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		s := srv.(*server)
		who := "plaintext"
		if p, ok := peer.FromContext(ctx); ok && p.AuthInfo != nil {
			who = p.AuthInfo.AuthType()
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 && len(ti.State.PeerCertificates[0].URIs) > 0 {
				who = "mTLS peer " + ti.State.PeerCertificates[0].URIs[0].String()
			}
		}
		return wrapperspb.String(s.version + " (" + who + ")"), nil
	}}},
}

type server struct{ version string }

func main() {
	mode := flag.String("mode", "server", "server or client")
	addr := flag.String("addr", ":9080", "server: listen address")
	version := flag.String("version", "v1", "server: the version it answers with")
	target := flag.String("target", "xds:///reviews.default.svc.cluster.local:9080", "client: what to call")
	calls := flag.Int("calls", 100, "client: number of calls")
	mtls := flag.Bool("mtls", false, "use xDS credentials (mTLS configured by istiod)")
	linger := flag.Duration("linger", 0, "client: keep the connection (and its xDS subscriptions) this long after the calls")
	flag.Parse()
	log.SetFlags(0)
	switch *mode {
	case "server":
		serve(*addr, *version, *mtls)
	case "client":
		os.Exit(call(*target, *calls, *mtls, *linger))
	default:
		log.Fatalf("unknown mode %q", *mode)
	}
}

func serve(addr, version string, mtls bool) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	var s interface {
		RegisterService(*grpc.ServiceDesc, any)
		Serve(net.Listener) error
	}
	if mtls {
		creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
		if err != nil {
			log.Fatal(err)
		}
		xs, err := xds.NewGRPCServer(grpc.Creds(creds))
		if err != nil {
			log.Fatal(err)
		}
		s = xs
	} else {
		s = grpc.NewServer()
	}
	s.RegisterService(&hello, &server{version: version})
	log.Printf("reviews %s serving on %s (mTLS from xDS: %t)", version, ln.Addr(), mtls)
	log.Fatal(s.Serve(ln))
}

func call(target string, n int, mtls bool, linger time.Duration) int {
	creds := insecure.NewCredentials()
	if mtls {
		var err error
		if creds, err = xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()}); err != nil {
			log.Print(err)
			return 1
		}
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		log.Print(err)
		return 1
	}
	defer conn.Close()
	counts := map[string]int{}
	failed := 0
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out := new(wrapperspb.StringValue)
		err := conn.Invoke(ctx, "/skiff.demo.Greeter/Hello", wrapperspb.String("hi"), out, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			failed++
			log.Printf("call %d: %v", i, err)
			continue
		}
		counts[out.GetValue()]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%d %s\n", counts[k], k)
	}
	if failed > 0 {
		fmt.Printf("%d failed\n", failed)
		return 1
	}
	time.Sleep(linger)
	return 0
}
