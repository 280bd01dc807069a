package bootstrap

import (
	"encoding/json"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// validateAll runs the generated validators on m and on every message packed in an Any inside it.
func validateAll(t *testing.T, m proto.Message) {
	t.Helper()
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%T: %v", m, err)
		}
	}
	var walk func(protoreflect.Message)
	walk = func(msg protoreflect.Message) {
		msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			visit := func(x protoreflect.Message) {
				if a, ok := x.Interface().(*anypb.Any); ok {
					inner, err := a.UnmarshalNew()
					if err != nil {
						t.Errorf("unpack %s: %v", a.TypeUrl, err)
						return
					}
					validateAll(t, inner)
					return
				}
				walk(x)
			}
			switch {
			case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
				for i := 0; i < v.List().Len(); i++ {
					visit(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { visit(mv.Message()); return true })
			case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind:
				visit(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
}

func TestEnvoyBootstrapValidates(t *testing.T) {
	e := &Envoy{
		Node: Node{ID: "sidecar~10.1.0.5~reviews-v1-abc.default~default.svc.cluster.local", Cluster: "reviews.default",
			Metadata: map[string]any{"NAMESPACE": "default", "LABELS": map[string]any{"app": "reviews"}, "DNS_CAPTURE": "true"}},
		XDSSocket: "./etc/istio/proxy/XDS", SDSSocket: "./var/run/secrets/workload-spiffe-uds/socket",
		AdminPort: 15000, StatusPort: 15020, StatsPort: 15090, ReadinessPort: 15021,
	}
	js, err := e.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("bootstrap does not parse as envoy.config.bootstrap.v3.Bootstrap: %v\n%s", err, js)
	}
	validateAll(t, &b)
	if b.GetNode().GetId() != e.Node.ID || b.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != "xds-grpc" {
		t.Errorf("node or ADS wrong: %v", b.GetNode())
	}
	names := map[string]bool{}
	for _, c := range b.GetStaticResources().GetClusters() {
		names[c.GetName()] = true
	}
	for _, want := range []string{"xds-grpc", "sds-grpc", "prometheus_stats", "agent"} {
		if !names[want] {
			t.Errorf("cluster %s missing", want)
		}
	}
}

// TestEnvoyADSType: delta xDS (Istio's default) or state of the world.
func TestEnvoyADSType(t *testing.T) {
	for delta, want := range map[bool]string{true: "DELTA_GRPC", false: "GRPC"} {
		js, err := (&Envoy{Delta: delta, AdminPort: 15000, StatusPort: 15020, StatsPort: 15090, ReadinessPort: 15021}).JSON()
		if err != nil {
			t.Fatal(err)
		}
		var b bootstrapv3.Bootstrap
		if err := protojson.Unmarshal(js, &b); err != nil {
			t.Fatal(err)
		}
		if got := b.GetDynamicResources().GetAdsConfig().GetApiType().String(); got != want {
			t.Errorf("Delta %v: api_type %s, want %s", delta, got, want)
		}
	}
}

func TestGRPCBootstrap(t *testing.T) {
	g := &GRPC{Node: Node{ID: "sidecar~10.1.0.5~app.default~default.svc.cluster.local"}, ServerURI: "unix:///etc/istio/proxy/XDS", CertDir: "/var/lib/istio/data"}
	js, err := g.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	node := m["node"].(map[string]any)
	if node["metadata"].(map[string]any)["GENERATOR"] != "grpc" {
		t.Errorf("GENERATOR metadata missing: %s", js)
	}
	if m["certificate_providers"].(map[string]any)["default"] == nil {
		t.Errorf("no certificate provider: %s", js)
	}
}
