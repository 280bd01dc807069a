package cluster_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster"
	"github.com/skiff-mesh/skiff/pkg/istioctl/cluster/clustertest"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
)

// TestPortForwardThroughTheAPIServer runs the real forwarder against a real
// API server, which hands the forward to a kubelet stand-in on loopback:
// the path a cluster takes, short of containers.
func TestPortForwardThroughTheAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx := kubetest.Context(t)

	istiodDebug := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "syncz from "+r.URL.Path)
	}))
	defer istiodDebug.Close()
	k := &clustertest.Kubelet{Targets: map[uint16]string{8080: istiodDebug.Listener.Addr().String()}}
	clustertest.StartKubelet(ctx, t, env.Client, "node-pf", k)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := env.Client.CoreV1().Pods("istio-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod-pf", Labels: map[string]string{"app": "istiod"}},
		Spec:       corev1.PodSpec{NodeName: "node-pf", Containers: []corev1.Container{{Name: "discovery", Image: "istiod"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if _, err := env.Client.CoreV1().Pods("istio-system").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	cl, err := cluster.Load(cluster.Options{Kubeconfig: env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := (&cluster.PortForwarder{Config: cl.Config}).Forward(ctx, "istio-system", "istiod-pf", cluster.IstiodDebugPort)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 2 { // two connections over one forward
		resp, err := hc.Get("http://" + addr + "/debug/syncz")
		if err != nil {
			t.Fatalf("GET %d through the forward: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "syncz from /debug/syncz" {
			t.Errorf("GET %d: %q", i, body)
		}
	}
	stop()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts after stop", addr)
	}
	want := []clustertest.Forward{{Namespace: "istio-system", Pod: "istiod-pf", Port: 8080}, {Namespace: "istio-system", Pod: "istiod-pf", Port: 8080}}
	if d := cmp.Diff(want, k.Forwards()); d != "" {
		t.Errorf("kubelet forwards (-want +got):\n%s", d)
	}
}
