package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Prober is one rewritten Kubernetes probe from ISTIO_KUBE_APP_PROBERS.
type Prober struct {
	HTTPGet        *HTTPGetAction `json:"httpGet,omitempty"`
	TCPSocket      *TCPAction     `json:"tcpSocket,omitempty"`
	GRPC           *GRPCAction    `json:"grpc,omitempty"`
	TimeoutSeconds int            `json:"timeoutSeconds,omitempty"`
}

// HTTPGetAction is a probe's HTTP request.
type HTTPGetAction struct {
	Path        string       `json:"path,omitempty"`
	Port        json.Number  `json:"port"`
	Host        string       `json:"host,omitempty"`
	Scheme      string       `json:"scheme,omitempty"`
	HTTPHeaders []HTTPHeader `json:"httpHeaders,omitempty"`
}

// HTTPHeader is one header of an HTTP probe.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TCPAction is a probe's TCP connect.
type TCPAction struct {
	Host string      `json:"host,omitempty"`
	Port json.Number `json:"port"`
}

// GRPCAction is a probe's gRPC health check.
type GRPCAction struct {
	Port    int     `json:"port"`
	Service *string `json:"service,omitempty"`
}

// Timeout is the probe's timeout, 1 s when unset (Kubernetes' default).
func (p *Prober) Timeout() time.Duration {
	if p.TimeoutSeconds <= 0 {
		return time.Second
	}
	return time.Duration(p.TimeoutSeconds) * time.Second
}

var proberPath = regexp.MustCompile(`^/app-health/[^/]+/(livez|readyz|startupz)$`)

// ParseProbers reads ISTIO_KUBE_APP_PROBERS: a JSON object from
// /app-health/<container>/<livez|readyz|startupz> to the app's original probe.
func ParseProbers(s string) (map[string]*Prober, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]*Prober
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("ISTIO_KUBE_APP_PROBERS: not a JSON object of probes: %w", err)
	}
	for path, p := range m {
		if !proberPath.MatchString(path) {
			return nil, fmt.Errorf("ISTIO_KUBE_APP_PROBERS: %q is not /app-health/<container>/{livez,readyz,startupz}", path)
		}
		n := 0
		if p != nil && p.HTTPGet != nil {
			n++
			if _, err := p.HTTPGet.Port.Int64(); err != nil {
				return nil, fmt.Errorf("ISTIO_KUBE_APP_PROBERS: %s: httpGet port %q is not a number", path, p.HTTPGet.Port)
			}
		}
		if p != nil && p.TCPSocket != nil {
			n++
			if _, err := p.TCPSocket.Port.Int64(); err != nil {
				return nil, fmt.Errorf("ISTIO_KUBE_APP_PROBERS: %s: tcpSocket port %q is not a number", path, p.TCPSocket.Port)
			}
		}
		if p != nil && p.GRPC != nil {
			n++
		}
		if n != 1 {
			return nil, fmt.Errorf("ISTIO_KUBE_APP_PROBERS: %s: want exactly one of httpGet, tcpSocket, grpc", path)
		}
	}
	return m, nil
}
