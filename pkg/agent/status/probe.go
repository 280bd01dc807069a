package status

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/agent/config"
	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

// probeSource is the address app probes come from: traffic from it on lo is
// never captured (the rules RETURN it), so probes reach the app directly.
var probeSource = net.IPv4(127, 0, 0, 6)

// prober runs the app's original probes on the kubelet's behalf.
type prober struct {
	// host is where probes go when the probe names none: the pod IP.
	host string
	// http2 lets HTTPS probes negotiate HTTP/2.
	http2 bool
}

func (p *prober) dialer() *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: probeSource}}
}

func (p *prober) target(host string, port string) string {
	if host == "" {
		host = p.host
	}
	return net.JoinHostPort(host, port)
}

// run performs one probe; nil means healthy.
func (p *prober) run(ctx context.Context, pr *config.Prober) error {
	ctx, cancel := context.WithTimeout(ctx, pr.Timeout())
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		return p.http(ctx, pr.HTTPGet)
	case pr.TCPSocket != nil:
		c, err := p.dialer().DialContext(ctx, "tcp", p.target(pr.TCPSocket.Host, pr.TCPSocket.Port.String()))
		if err != nil {
			return err
		}
		return c.Close()
	case pr.GRPC != nil:
		return p.grpc(ctx, pr.GRPC)
	}
	return fmt.Errorf("empty probe")
}

func (p *prober) http(ctx context.Context, h *config.HTTPGetAction) error {
	scheme := strings.ToLower(h.Scheme)
	if scheme == "" {
		scheme = "http"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+p.target(h.Host, h.Port.String())+path, nil)
	if err != nil {
		return err
	}
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	tr := &http.Transport{
		DialContext:       p.dialer().DialContext,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet does not verify probe certificates either
		ForceAttemptHTTP2: p.http2,
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe: status %d", resp.StatusCode)
	}
	return nil
}

func (p *prober) grpc(ctx context.Context, g *config.GRPCAction) error {
	addr := p.target("", strconv.Itoa(g.Port))
	conn, err := grpcwire.Dial(addr, grpcwire.DialOptions{Dial: func(ctx context.Context) (net.Conn, error) {
		return p.dialer().DialContext(ctx, "tcp", addr)
	}})
	if err != nil {
		return err
	}
	defer conn.Close()
	var service string
	if g.Service != nil {
		service = *g.Service
	}
	b, err := conn.Invoke(ctx, healthCheck, xdswire.HealthCheckRequest(service))
	if err != nil {
		return err
	}
	st, err := xdswire.DecodeHealthCheckResponse(b)
	if err != nil {
		return fmt.Errorf("gRPC probe: %w", err)
	}
	if st != xdswire.HealthServing {
		return fmt.Errorf("gRPC probe: %s", xdswire.HealthStatusName(st))
	}
	return nil
}

// healthCheck is the method of gRPC's health checking protocol.
const healthCheck = "/grpc.health.v1.Health/Check"
