package inject

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTemplateFuncs renders one-line templates with the functions Istio's
// templates call and checks Istio's meaning of each.
func TestTemplateFuncs(t *testing.T) {
	d := map[string]any{
		"Meta": metav1.ObjectMeta{Annotations: map[string]string{"a": "x"}},
		"Containers": []corev1.Container{
			{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
			{Name: "istio-proxy", Ports: []corev1.ContainerPort{{ContainerPort: 15090}}},
		},
		"PC":     &meshconfig.ProxyConfig{StatusPort: 15020, DrainDuration: durationpb.New(23e9), DiscoveryAddress: "istiod.istio-system.svc:15012"},
		"Labels": map[string]string{"app": "a", "v": "1"},
		"Nil":    map[string]any{"a": nil, "b": map[string]any{"c": nil}, "d": 1},
	}
	for _, tc := range []struct{ tmpl, want string }{
		{`{{ annotation .Meta "a" "d" }}`, "x"},
		{`{{ annotation .Meta "b" "d" }}`, "d"},
		{`{{ annotation .Meta "b" nil }}`, "<nil>"},
		{`{{ isset .Meta.Annotations "a" }} {{ isset .Meta.Annotations "b" }}`, "true false"},
		{`{{ valueOrDefault "" "d" }} {{ valueOrDefault false "d" }} {{ valueOrDefault 0 "d" }}`, "d false 0"},
		{`{{ indent 2 "a\nb" }}`, "a\n  b"},
		{`{{ "a\nb" | nindent 2 }}`, "\n  a\n  b"},
		{`{{ toYaml .Labels }}`, "app: a\nv: \"1\"\n"},
		{`{{ contains "b" "abc" }} {{ "abc" | quote }} {{ toLower "AB" }}`, `true "abc" ab`},
		{`{{ excludeInboundPort 15020 "" }}|{{ excludeInboundPort "0" "1,2" }}|{{ excludeInboundPort 2 "1,2" }}|{{ excludeInboundPort 3 "1, 2" }}`, "15020|1,2|1,2|1,2,3"},
		{`{{ includeInboundPorts .Containers }}|{{ applicationPorts .Containers }}`, "80,15090|80"},
		{`{{ appendMultusNetwork "" "default/istio-cni" }}|{{ appendMultusNetwork "n1" "default/istio-cni" }}`, "default/istio-cni|n1, default/istio-cni"},
		{`{{ appendMultusNetwork "[{\"name\":\"n\"}]" "istio-cni" }}`, `[{"name":"n"}, {"name": "istio-cni"}]`},
		{`{{ toJsonMap .Labels (strdict "v" "2" "w") }}`, `{"app":"a","v":"2","w":""}`},
		{`{{ omit .Labels "app" | toJSON }}`, `{"v":"1"}`},
		{`{{ omitNil .Nil | toJSON }}`, `{"d":1}`},
		{`{{ protoToJSON .PC }}`, `{"drainDuration":"23s"}`},
		{`{{ formatDuration .PC.DrainDuration }} {{ directory "/a/b/c.pem" }}`, "23s /a/b/"},
		{`{{ fromJSON "{\"a\":1}" | toJSON }} {{ fromJSON "nope" }}`, `{"a":1} {}`},
	} {
		tm, err := parseTemplate("t", tc.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		var b bytes.Buffer
		if err := tm.Execute(&b, d); err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		if b.String() != tc.want {
			t.Errorf("%s = %q, want %q", tc.tmpl, b.String(), tc.want)
		}
	}
}
