package clustertest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

// Kubelet stands in for a node's kubelet streaming server, so the real
// port-forward runs through a real API server without containers: the API
// server hands it each pods/portforward (over SPDY) and it connects every
// stream to the loopback address that stands for the pod's port.
type Kubelet struct {
	// Targets maps a pod port to the local address that stands for it.
	Targets map[uint16]string

	mu       sync.Mutex
	forwards []Forward
}

// StartKubelet serves k over TLS on loopback until the test ends and
// registers node in the API server with that address and port; pods whose
// spec.nodeName is node are then reachable by port-forward.
func StartKubelet(ctx context.Context, t testing.TB, cs kubernetes.Interface, node string, k *Kubelet) {
	t.Helper()
	s := httptest.NewTLSServer(k)
	t.Cleanup(s.Close)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Forwards returns the forwards the API server handed over so far.
func (k *Kubelet) Forwards() []Forward {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Forward(nil), k.forwards...)
}

// ServeHTTP serves /portForward/NAMESPACE/POD[/UID].
func (k *Kubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "portForward" {
		http.NotFound(w, r)
		return
	}
	portforward.ServePortForward(w, r, &podForwarder{k: k, namespace: parts[1]}, parts[2], "", nil, time.Minute, 30*time.Second, portforward.SupportedProtocols)
}

// podForwarder connects the streams of one pod's port-forward.
type podForwarder struct {
	k         *Kubelet
	namespace string
}

func (f *podForwarder) PortForward(ctx context.Context, name, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	f.k.mu.Lock()
	f.k.forwards = append(f.k.forwards, Forward{Namespace: f.namespace, Pod: name, Port: uint16(port)})
	target, ok := f.k.Targets[uint16(port)]
	f.k.mu.Unlock()
	if !ok {
		return io.ErrUnexpectedEOF
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	<-done
	return nil
}
