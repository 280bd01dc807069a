package kubenode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/ociimage"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a node needs root (CI runs as root)")
	}
}

// busyboxImage writes an image of Debian's busybox-static under the given
// names; as the sandbox image it just sleeps.
func busyboxImage(t *testing.T, names ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "busybox.tar")
	img := ociimage.Image{Names: names,
		Config: ociimage.Config{Entrypoint: []string{"/bin/sleep", "2147483647"}},
		Layers: [][]ociimage.Entry{{
			ociimage.HostFile("/bin/busybox", 0o755, "/bin/busybox"),
			ociimage.Symlink("/bin/sh", "busybox"), ociimage.Symlink("/bin/sleep", "busybox"),
			ociimage.Symlink("/bin/cat", "busybox"), ociimage.Symlink("/bin/nslookup", "busybox"),
			ociimage.Dir("/tmp", 0o1777),
		}}}
	if _, err := ociimage.WriteFile(p, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNodeRunsPods brings a node up and runs a pod that resolves a name
// through the cluster DNS and the kubernetes Service through kube-proxy.
func TestNodeRunsPods(t *testing.T) {
	requireRoot(t)
	img := busyboxImage(t, SandboxImage, "docker.io/library/busybox:test")
	n := Start(t, Options{Images: []string{img}, Hosts: []HostEntry{{IP: "10.250.0.77", Name: "api.external.test"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := n.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "c", Image: "docker.io/library/busybox:test", ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", "nslookup kubernetes.default.svc.cluster.local && nslookup api.external.test && cat /etc/resolv.conf"}}},
	}}
	if _, err := n.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	err := Poll(ctx, "pod probe done", func() (bool, error) {
		p, err := n.Client.CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	logs, _ := n.Client.CoreV1().Pods("default").GetLogs("probe", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || phase != corev1.PodSucceeded {
		t.Fatalf("pod %s (%v):\n%s", phase, err, logs)
	}
	for _, want := range []string{APIServiceIP, "10.250.0.77", "nameserver " + NodeIP} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("pod output lacks %q:\n%s", want, logs)
		}
	}
}
