package interop

import (
	"bytes"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// reviewsPort is the port of the Service reviews and of its backend.
const reviewsPort = 9080

// serveReviews runs a gRPC server (the standard health service) on
// podIP:9080 inside the pod's namespace and publishes it as the only
// endpoint of the Service reviews with an EndpointSlice (no target pod:
// the API server refuses loopback addresses, so the pod's own address).
func serveReviews(t *testing.T, ctx context.Context, env *kubetest.Env, p *pod) {
	t.Helper()
	var l net.Listener
	p.ns.Do(t, func() error {
		var err error
		l, err = net.Listen("tcp", net.JoinHostPort(podIP, "9080"))
		return err
	})
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)

	name, proto, port := "grpc", corev1.ProtocolTCP, int32(reviewsPort)
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews-1", Namespace: p.namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{podIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	if _, err := env.Client.DiscoveryV1().EndpointSlices(p.namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// dialInPod dials from inside the pod's network namespace, so the
// proxyless client's connections to its backends start in the pod.
func dialInPod(p *pod) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := netns.Do(p.ns.Path, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	})
}

// proxylessCall makes grpc-go's xDS client, with the bootstrap the agent
// wrote, call the health service of reviews at
// xds:///reviews.NS.svc.cluster.local:9080: listener, route, cluster and
// endpoint all come through the agent's XDS socket from the control plane.
func proxylessCall(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	var last error
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last health Check error: %v", last)
		}
	})
	polltest.Within(t, 30*time.Second, "health Check through xds:///reviews", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		last = err
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
}

// agentClient connects grpc-go's xDS resolver with
// the agent's bootstrap (its socket path seen from the host) to target,
// dialing backends from the pod's namespace. Istio's agent asks for the
// NameTable only on a stream it proxies, so this also starts its DNS.
func agentClient(t *testing.T, p *pod, bootstrap, target string) *grpc.ClientConn {
	t.Helper()
	var b []byte
	polltest.Within(t, 30*time.Second, "agent's gRPC bootstrap "+bootstrap, func() bool {
		var err error
		b, err = os.ReadFile(bootstrap)
		return err == nil && len(b) > 0
	})
	// Istio's agent names its socket as the container sees it, with the
	// pod's root at /; Skiff's by its absolute path from its working
	// directory, the pod's root (the same path in a real container).
	b = bytes.ReplaceAll(b, []byte(`"unix://`+p.root+`/`), []byte(`"unix:///`))
	b = bytes.ReplaceAll(b, []byte(`"unix:///`), []byte(`"unix://`+p.root+`/`))
	builder, err := xds.NewXDSResolverWithConfigForTesting(b)
	if err != nil {
		t.Fatalf("bootstrap %s: %v\n%s", bootstrap, err, b)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(builder), dialInPod(p))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	cc.Connect()
	return cc
}

// upstreamDNS is a resolver on 127.0.0.1:53 in the pod's namespace (its
// resolv.conf's nameserver): it answers NXDOMAIN, but for bigName, and
// records each question, to tell what the agent answers itself from what
// it forwards.
type upstreamDNS struct {
	mu    sync.Mutex
	asked []string // "NAME TYPE"
}

func startUpstreamDNS(t *testing.T, p *pod) *upstreamDNS {
	t.Helper()
	u := &upstreamDNS{}
	var pc net.PacketConn
	var l net.Listener
	p.ns.Do(t, func() error {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:53"); err != nil {
			return err
		}
		l, err = net.Listen("tcp", "127.0.0.1:53")
		return err
	})
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if len(r.Question) == 1 {
			u.mu.Lock()
			u.asked = append(u.asked, strings.ToLower(r.Question[0].Name)+" "+dns.TypeToString[r.Question[0].Qtype])
			u.mu.Unlock()
		}
		m := new(dns.Msg)
		if len(r.Question) == 1 && strings.EqualFold(r.Question[0].Name, bigName) && r.Question[0].Qtype == dns.TypeTXT {
			m.SetReply(r)
			m.Answer = bigAnswer(r.Question[0].Name)
			// As CoreDNS does: what a UDP client can take, with TC.
			if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
				size := dns.MinMsgSize
				if opt := r.IsEdns0(); opt != nil {
					size = max(int(opt.UDPSize()), dns.MinMsgSize)
				}
				m.Truncate(size)
			}
		} else {
			m.SetRcode(r, dns.RcodeNameError)
		}
		_ = w.WriteMsg(m)
	})
	udp, tcp := &dns.Server{PacketConn: pc, Handler: h}, &dns.Server{Listener: l, Handler: h}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	return u
}

// bigName is the one name the upstream answers: 30 TXT records, about 2 kB.
const bigName = "big.example."

// bigAnswer is the upstream's answer for bigName.
func bigAnswer(owner string) []dns.RR {
	var rrs []dns.RR
	for i := range 30 {
		rrs = append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 30},
			Txt: []string{strconv.Itoa(i) + strings.Repeat("x", 60)}})
	}
	return rrs
}

// wasAsked reports whether the upstream saw a question for name and qtype.
func (u *upstreamDNS) wasAsked(name string, qtype uint16) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	want := strings.ToLower(dns.Fqdn(name)) + " " + dns.TypeToString[qtype]
	for _, a := range u.asked {
		if a == want {
			return true
		}
	}
	return false
}

// query asks the pod's DNS proxy (127.0.0.1:15053 in its namespace) one
// question and returns the response (nil when none came).
func (p *pod) query(t *testing.T, name string, qtype uint16) *dns.Msg {
	t.Helper()
	var resp *dns.Msg
	p.ns.Do(t, func() error {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		c := &dns.Client{Timeout: 2 * time.Second}
		resp, _, _ = c.Exchange(m, "127.0.0.1:15053")
		return nil
	})
	return resp
}

// srvPorts returns the ports and targets of the SRV answers in resp.
func srvPorts(resp *dns.Msg) []string {
	var out []string
	for _, rr := range resp.Answer {
		if s, ok := rr.(*dns.SRV); ok {
			out = append(out, s.Target+":"+strconv.Itoa(int(s.Port)))
		}
	}
	return out
}
