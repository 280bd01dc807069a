package cni

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cacheFile is a pod cache file as install-cni writes it: the JSON of a
// trimmed core/v1 Pod (podcache's trim keeps these fields).
func cacheFile(t testing.TB, mutate func(*corev1.Pod)) []byte {
	uid, gid := int64(1337), int64(1337)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews-v1-abc", Namespace: "default", UID: "6f1d",
			Labels:      map[string]string{"app": "reviews", "version": "v1"},
			Annotations: map[string]string{AnnotationStatus: `{"initContainers":["istio-validation"],"containers":["istio-proxy"]}`, AnnotationInterceptionMode: "TPROXY"}},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			InitContainers: []corev1.Container{{Name: "istio-validation", Args: []string{"istio-iptables", "--run-validation"}}},
			Containers: []corev1.Container{
				{Name: "reviews"},
				{Name: "istio-proxy", Args: []string{"proxy", "sidecar"},
					Env:             []corev1.EnvVar{{Name: "ISTIO_META_DNS_CAPTURE", Value: "true"}, {Name: "POD_NAME"}},
					SecurityContext: &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &gid}},
			},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodePodAsStruct: decodePod reads install-cni's files, and JSON of
// their shape, as json.Unmarshal into Pod does.
func TestDecodePodAsStruct(t *testing.T) {
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"injected pod", cacheFile(t, nil)},
		{"no labels, annotations or containers", cacheFile(t, func(p *corev1.Pod) {
			p.Labels, p.Annotations, p.Spec.InitContainers, p.Spec.Containers = nil, nil, nil, nil
		})},
		{"empty lists and maps", cacheFile(t, func(p *corev1.Pod) {
			p.Labels, p.Spec.Containers = map[string]string{}, []corev1.Container{{Name: "a", Args: []string{}, Env: []corev1.EnvVar{}, SecurityContext: &corev1.SecurityContext{}}}
		})},
		{"nulls", []byte(`{"metadata":{"name":null,"labels":{"a":null}},"spec":{"containers":[null,{"args":[null],"env":[null],"securityContext":null}]}}`)},
		{"unknown fields and a repeated key", []byte(`{"kind":"Pod","metadata":{"name":"a","name":"b","x":[1,{"y":null}]},"spec":{"containers":[{"name":"c","ports":[{"containerPort":80}]}]},"status":{}}`)},
		{"null pod", []byte(`null`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want Pod
			if err := json.Unmarshal(tc.file, &want); err != nil {
				t.Fatal(err)
			}
			got, err := decodePod(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("decodePod %+v\njson.Unmarshal %+v", got, &want)
			}
		})
	}
	for _, bad := range []string{`[]`, `{"metadata":[]}`, `{"metadata":{"name":5}}`, `{"spec":{"containers":{}}}`,
		`{"spec":{"containers":[{"securityContext":{"runAsUser":1.5}}]}}`, `{"spec":{"containers":[{"securityContext":{"runAsUser":"0"}}]}}`,
		`{"metadata":{}} x`, `{"metadata":`} {
		var want Pod
		if json.Unmarshal([]byte(bad), &want) == nil {
			t.Fatalf("%s: json.Unmarshal took it", bad)
		}
		if _, err := decodePod([]byte(bad)); err == nil {
			t.Errorf("%s: decodePod took what json.Unmarshal refuses", bad)
		}
	}
}

// FuzzDecodePod: whatever json.Unmarshal makes a Pod of, written back as
// install-cni writes its files (json.Marshal, exact keys), decodePod reads
// as the same Pod; and no input makes it panic.
func FuzzDecodePod(f *testing.F) {
	f.Add(cacheFile(f, nil))
	f.Add([]byte(`{"metadata":{"name":null,"labels":{"a":null}},"spec":{"containers":[null,{"args":[null],"env":[null],"securityContext":{}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodePod(b)
		var want Pod
		if json.Unmarshal(b, &want) != nil {
			return
		}
		file, err := json.Marshal(&want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePod(file)
		if err != nil {
			t.Fatalf("decodePod(%s): %v", file, err)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("decodePod(%s) = %+v, want %+v", file, got, &want)
		}
	})
}
