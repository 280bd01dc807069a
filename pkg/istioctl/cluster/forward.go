package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"

	"github.com/skiff-mesh/skiff/pkg/kuberest"
)

// Forwarder opens local ports forwarded to ports of pods.
type Forwarder interface {
	// Forward listens on a loopback port whose connections reach port of
	// the pod namespace/name, and returns that address ("127.0.0.1:N").
	// The forward ends with ctx or when stop is called.
	Forward(ctx context.Context, namespace, name string, port uint16) (addr string, stop func(), err error)
}

// PortForwarder forwards through the API server's pods/portforward
// subresource, as kubectl port-forward does: a WebSocket tunnel first,
// SPDY when the server refuses the upgrade.
type PortForwarder struct {
	Config *rest.Config
	// Log receives client-go's forwarding messages (nil: discarded).
	Log io.Writer
}

var _ Forwarder = (*PortForwarder)(nil)

// Forward implements Forwarder.
func (f *PortForwarder) Forward(ctx context.Context, namespace, name string, port uint16) (string, func(), error) {
	what := fmt.Sprintf("port-forward to %s.%s:%d", name, namespace, port)
	dialer, err := f.dialer(namespace, name)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", what, err)
	}
	log := f.Log
	if log == nil {
		log = io.Discard
	}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(port))}, ctx.Done(), ready, log, log)
	if err != nil {
		cancel()
		return "", nil, fmt.Errorf("%s: %w", what, err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("ended before it was ready")
		}
		return "", nil, fmt.Errorf("%s: %w", what, err)
	case <-ctx.Done():
		cancel()
		<-done
		return "", nil, fmt.Errorf("%s: %w", what, ctx.Err())
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		cancel()
		<-done
		return "", nil, fmt.Errorf("%s: local port: %v", what, err)
	}
	stop := func() {
		cancel()
		<-done
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), stop, nil
}

// dialer is kubectl's: SPDY over a WebSocket tunnel, falling back to SPDY.
func (f *PortForwarder) dialer(namespace, name string) (streamhttp.Dialer, error) {
	core, err := kuberest.NewCore(f.Config, false)
	if err != nil {
		return nil, err
	}
	u := core.Post().Resource("pods").Namespace(namespace).Name(name).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(f.Config)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, f.Config)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialerForStreaming(ws, spdyDialer, func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
	}), nil
}
