package security_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/skiff-mesh/skiff/pkg/istiod/proxylesstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// call makes one UnaryCall and returns the answering workload, or the
// status code of the failure. It does not wait for the channel to be
// ready: a refused handshake fails the call (UNAVAILABLE) instead of
// blocking it.
func call(t *testing.T, c testpb.TestServiceClient) (string, codes.Code) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	if err != nil {
		return "", status.Code(err)
	}
	return resp.GetHostname(), codes.OK
}

func emptyCall(t *testing.T, c testpb.TestServiceClient) codes.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := c.EmptyCall(ctx, &testpb.Empty{})
	return status.Code(err)
}

// setup writes a mesh with the echo workload at ip (service account echo)
// behind two services: "echo" (clients use plaintext) and "echo-mtls"
// (a DestinationRule asks clients for ISTIO_MUTUAL), plus the policies;
// starts istiod and the workload's xDS server with its certificates.
func setup(t *testing.T, c *ca, ip, extraLabels string, policies ...string) string {
	addr, _ := setupMesh(t, c, ip, extraLabels, policies...)
	return addr
}

// setupMesh is setup, also returning the mesh for later edits.
func setupMesh(t *testing.T, c *ca, ip, extraLabels string, policies ...string) (string, *proxylesstest.Mesh) {
	t.Helper()
	m := proxylesstest.NewMesh(t)
	lis, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	m.Write("echo.yaml", workload("echo", "default", "echo", ip, extraLabels, port, "echo", "echo-mtls")...)
	m.Write("dr.yaml", istioMutual("echo-mtls", "default", "echo-mtls.default.svc.cluster.local"))
	if len(policies) > 0 {
		m.Write("policy.yaml", policies...)
	}
	d := m.Start(nil)
	addr := d.Addr("grpc")
	serveXDS(t, addr, lis, ip, "echo-0", "default", c.identity("default", "echo"))
	return addr, m
}

const target = "xds:///echo.default.svc.cluster.local:7070"
const mtlsTarget = "xds:///echo-mtls.default.svc.cluster.local:7070"

func peerAuthn(name, ns, selector, mode string) string {
	sel := ""
	if selector != "" {
		sel = fmt.Sprintf("\n  selector: {matchLabels: {%s}}", selector)
	}
	return fmt.Sprintf(`apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: %s, namespace: %s}
spec:%s
  mtls: {mode: %s}`, name, ns, sel, mode)
}

// TestPeerAuthenticationStrict: a STRICT workload refuses a plaintext
// client and serves a client using Istio mutual TLS.
func TestPeerAuthenticationStrict(t *testing.T) {
	c := newCA(t)
	addr := setup(t, c, "127.0.0.51", "", peerAuthn("default", "istio-system", "", "STRICT"))
	clientCerts := c.identity("default", "a")
	mtls := client(t, addr, "127.0.0.61", "default", clientCerts, mtlsTarget)
	if got, code := call(t, mtls); code != codes.OK || got != "echo-0" {
		t.Fatalf("mTLS client: got %q, %v; want echo-0, OK", got, code)
	}
	plain := client(t, addr, "127.0.0.62", "default", "", target)
	if _, code := call(t, plain); code != codes.Unavailable {
		t.Fatalf("plaintext client of a STRICT workload: got %v, want Unavailable", code)
	}
}

// TestPeerAuthenticationPermissive: PERMISSIVE (namespace policy over a
// STRICT mesh) serves plaintext clients. grpc-go cannot serve both on one
// port, so as in Istio a PERMISSIVE proxyless server takes plaintext, or
// mutual TLS when its workload has the security.istio.io/tlsMode=istio
// label (clients then always use it).
func TestPeerAuthenticationPermissive(t *testing.T) {
	c := newCA(t)
	policies := []string{peerAuthn("default", "istio-system", "", "STRICT"), peerAuthn("default", "default", "", "PERMISSIVE")}
	t.Run("plaintext", func(t *testing.T) {
		addr := setup(t, c, "127.0.0.52", "", policies...)
		plain := client(t, addr, "127.0.0.63", "default", "", target)
		if got, code := call(t, plain); code != codes.OK || got != "echo-0" {
			t.Fatalf("plaintext client: got %q, %v; want echo-0, OK", got, code)
		}
	})
	t.Run("tlsMode label", func(t *testing.T) {
		addr := setup(t, c, "127.0.0.53", `security.istio.io/tlsMode: istio`, policies...)
		mtls := client(t, addr, "127.0.0.64", "default", c.identity("default", "a"), mtlsTarget)
		if got, code := call(t, mtls); code != codes.OK || got != "echo-0" {
			t.Fatalf("mTLS client: got %q, %v; want echo-0, OK", got, code)
		}
	})
}

// TestAuthorizationDeny: a DENY policy for one principal answers it
// PERMISSION_DENIED while another principal is served.
func TestAuthorizationDeny(t *testing.T) {
	c := newCA(t)
	addr := setup(t, c, "127.0.0.54", "", peerAuthn("default", "istio-system", "", "STRICT"), `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-b, namespace: default}
spec:
  selector: {matchLabels: {app: echo}}
  action: DENY
  rules: [{from: [{source: {principals: [cluster.local/ns/default/sa/b]}}]}]`)
	a := client(t, addr, "127.0.0.65", "default", c.identity("default", "a"), mtlsTarget)
	b := client(t, addr, "127.0.0.66", "default", c.identity("default", "b"), mtlsTarget)
	if got, code := call(t, a); code != codes.OK || got != "echo-0" {
		t.Fatalf("principal a: got %q, %v; want echo-0, OK", got, code)
	}
	if _, code := call(t, b); code != codes.PermissionDenied {
		t.Fatalf("principal b: got %v, want PermissionDenied", code)
	}
}

// TestAuthorizationAllowPath: an ALLOW policy naming one method's path
// serves that method and denies the others.
func TestAuthorizationAllowPath(t *testing.T) {
	c := newCA(t)
	addr := setup(t, c, "127.0.0.55", "", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: unary-only, namespace: default}
spec:
  action: ALLOW
  rules: [{to: [{operation: {paths: [/grpc.testing.TestService/UnaryCall]}}]}]`)
	cl := client(t, addr, "127.0.0.67", "default", "", target)
	if got, code := call(t, cl); code != codes.OK || got != "echo-0" {
		t.Fatalf("UnaryCall: got %q, %v; want echo-0, OK", got, code)
	}
	if code := emptyCall(t, cl); code != codes.PermissionDenied {
		t.Fatalf("EmptyCall: got %v, want PermissionDenied", code)
	}
}

// TestAuthorizationWhen: an ALLOW rule with "when" conditions on a request
// header and the source namespace serves only the calls meeting both.
func TestAuthorizationWhen(t *testing.T) {
	c := newCA(t)
	addr := setup(t, c, "127.0.0.56", "", peerAuthn("default", "istio-system", "", "STRICT"), `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: alice-from-default, namespace: default}
spec:
  selector: {matchLabels: {app: echo}}
  rules:
  - when:
    - {key: "request.headers[x-user]", values: [alice]}
    - {key: source.namespace, values: [default]}`)
	fromDefault := client(t, addr, "127.0.0.68", "default", c.identity("default", "a"), mtlsTarget)
	fromOther := client(t, addr, "127.0.0.69", "default", c.identity("other", "a"), mtlsTarget)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-user", "alice")
	if _, err := fromDefault.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("alice from default: %v", err)
	}
	if _, err := fromOther.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice from namespace other: got %v, want PermissionDenied", err)
	}
	if _, code := call(t, fromDefault); code != codes.PermissionDenied {
		t.Fatalf("no x-user header: got %v, want PermissionDenied", code)
	}
}

// TestAuthorizationUpdate: a DENY policy written while the server runs
// reaches it through a push, and the principal it names is refused.
func TestAuthorizationUpdate(t *testing.T) {
	c := newCA(t)
	addr, m := setupMesh(t, c, "127.0.0.57", "", peerAuthn("default", "istio-system", "", "STRICT"))
	b := client(t, addr, "127.0.0.70", "default", c.identity("default", "b"), mtlsTarget)
	if _, code := call(t, b); code != codes.OK {
		t.Fatalf("before the policy: got %v, want OK", code)
	}
	m.Write("deny.yaml", `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-b, namespace: default}
spec:
  action: DENY
  rules: [{from: [{source: {principals: ["*/sa/b"]}}]}]`)
	polltest.Within(t, 20*time.Second, "b denied after the policy is written", func() bool {
		_, code := call(t, b)
		return code == codes.PermissionDenied
	})
}
