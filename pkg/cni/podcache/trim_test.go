package podcache

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-mesh/skiff/pkg/cni"
)

// TestTrimKeepsWhatThePluginReads: the plugin decodes the same cni.Pod from
// a trimmed pod as from the whole object. The fixture sets every field
// cni.Pod has (checked), so a field added there must be kept by trim too.
func TestTrimKeepsWhatThePluginReads(t *testing.T) {
	uid, gid := int64(1337), int64(1338)
	c := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "img", Args: []string{"proxy", "sidecar"},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
			Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
			SecurityContext: &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &gid, Privileged: new(bool)}}
	}
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"sidecar.istio.io/status": "{}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n1", InitContainers: []corev1.Container{c("istio-validation")},
			Containers: []corev1.Container{c("app"), c("istio-proxy")}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	decode := func(p *corev1.Pod) (cni.Pod, int) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var out cni.Pod
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out, len(b)
	}
	want, fullSize := decode(full)
	if path := zeroField(reflect.ValueOf(want), "Pod"); path != "" {
		t.Fatalf("the fixture leaves %s unset: set it so that trim is checked to keep it", path)
	}
	trimmed, err := trim(full)
	if err != nil {
		t.Fatal(err)
	}
	got, size := decode(trimmed.(*corev1.Pod))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("trimmed pod decodes to\n%+v\nwant\n%+v", got, want)
	}
	if size >= fullSize {
		t.Errorf("trimmed pod is %d bytes of JSON, the whole one %d", size, fullSize)
	}
	if tomb := (cache.DeletedFinalStateUnknown{Key: "a/b"}); !reflect.DeepEqual(mustTrim(t, tomb), tomb) {
		t.Error("a tombstone was changed")
	}
}

func mustTrim(t *testing.T, obj any) any {
	t.Helper()
	out, err := trim(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// zeroField is the path of the first zero-valued field under v, or "".
func zeroField(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if p := zeroField(v.Field(i), path+"."+v.Type().Field(i).Name); p != "" {
				return p
			}
		}
		return ""
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return path
		}
		if v.Kind() == reflect.Slice {
			return zeroField(v.Index(0), path+"[0]")
		}
		return ""
	case reflect.Pointer:
		if v.IsNil() {
			return path
		}
		return zeroField(v.Elem(), path)
	}
	if v.IsZero() {
		return path
	}
	return ""
}
