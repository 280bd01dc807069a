// Package kubeapi reads one pod from the Kubernetes API server with the
// CNI plugin's kubeconfig: the lookup helper (cmd/cni-lookup) that the
// plugin runs when the node agent's pod cache cannot answer. It lives apart
// from package cni so that the plugin, started for every pod, links no
// HTTP, TLS or YAML code.
package kubeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/skiff-mesh/skiff/pkg/cni"
)

// kubeconfig is the part of a kubeconfig file the plugin reads: the current
// context's cluster and user. The node agent writes it (token and CA).
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                string `json:"server"`
			CertificateAuthority  string `json:"certificate-authority"`
			CertificateAuthorityD []byte `json:"certificate-authority-data"`
			InsecureSkipTLSVerify bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token      string `json:"token"`
			TokenFile  string `json:"tokenFile"`
			ClientCert []byte `json:"client-certificate-data"`
			ClientKey  []byte `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
}

// Client is a minimal Kubernetes API client: one GET per pod. The helper
// runs once per pod the cache misses, so it does without client-go's
// start-up cost and size (a 38 MB binary with every core/v1 type
// registered at init).
type Client struct {
	server string
	token  string
	http   *http.Client
}

// New builds a Client from a kubeconfig file.
func New(path string) (*Client, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return nil, fmt.Errorf("parse kubeconfig %s: %w", path, err)
	}
	clusterName, userName := "", ""
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext || len(kc.Contexts) == 1 {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	c := &Client{}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != clusterName {
			continue
		}
		found = true
		c.server = strings.TrimRight(cl.Cluster.Server, "/")
		tlsCfg.InsecureSkipVerify = cl.Cluster.InsecureSkipTLSVerify
		ca := cl.Cluster.CertificateAuthorityD
		if cl.Cluster.CertificateAuthority != "" {
			p := cl.Cluster.CertificateAuthority
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(path), p)
			}
			if ca, err = os.ReadFile(p); err != nil {
				return nil, fmt.Errorf("kubeconfig %s: read CA: %w", path, err)
			}
		}
		if len(ca) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return nil, fmt.Errorf("kubeconfig %s: certificate authority holds no PEM certificate", path)
			}
			tlsCfg.RootCAs = pool
		}
	}
	if !found || c.server == "" {
		return nil, fmt.Errorf("kubeconfig %s: no cluster server for context %q", path, kc.CurrentContext)
	}
	if _, err := url.Parse(c.server); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: server: %w", path, err)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		c.token = u.User.Token
		if u.User.TokenFile != "" {
			t, err := os.ReadFile(u.User.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: read token: %w", path, err)
			}
			c.token = strings.TrimSpace(string(t))
		}
		if len(u.User.ClientCert) > 0 {
			cert, err := tls.X509KeyPair(u.User.ClientCert, u.User.ClientKey)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: client certificate: %w", path, err)
			}
			tlsCfg.Certificates = []tls.Certificate{cert}
		}
	}
	c.http = &http.Client{Timeout: cni.RequestTimeout, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	return c, nil
}

// GetPod reads one pod: ErrPodNotFound when the API server does not
// know it.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*cni.Pod, error) {
	u := c.server + podPath(namespace, name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return decodePod(u, resp.StatusCode, body)
}

// userAgent is the helper's User-Agent towards the API server.
const userAgent = "skiff-cni"

// podPath is the API's path of one pod.
func podPath(namespace, name string) string {
	return "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(name)
}

// ErrPodNotFound is a pod the API server does not know (yet).
var ErrPodNotFound = errors.New("not found")

// decodePod reads the answer to a pod GET of u: the pod on 200,
// ErrPodNotFound on 404, or an error with the status and body.
func decodePod(u string, status int, body []byte) (*cni.Pod, error) {
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, ErrPodNotFound
	default:
		return nil, fmt.Errorf("GET %s: %d %s: %s", u, status, http.StatusText(status), strings.TrimSpace(string(body)))
	}
	var pod cni.Pod
	if err := json.Unmarshal(body, &pod); err != nil {
		return nil, fmt.Errorf("decode pod from %s: %w", u, err)
	}
	return &pod, nil
}

// Lookup reads the pod l names with l's kubeconfig, trying up to l.Tries
// times, l.Interval apart, while the pod is not visible yet or the API
// server does not answer. A kubeconfig it cannot use is a
// *cni.KubeconfigError.
func Lookup(ctx context.Context, l cni.Lookup) (*cni.Pod, error) {
	c, err := New(l.Kubeconfig)
	if err != nil {
		return nil, &cni.KubeconfigError{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, l.Timeout())
	defer cancel()
	return getPodWithRetry(ctx, c, l.Namespace, l.Name, l.Tries, l.Interval)
}

// getPodWithRetry tries the lookup up to tries times, interval apart: the
// pod may not be visible yet, or the API server briefly unreachable. It
// stops early when ctx ends.
func getPodWithRetry(ctx context.Context, pods *Client, namespace, name string, tries int, interval time.Duration) (*cni.Pod, error) {
	var err error
	for i := 0; i < tries; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("get pod %s/%s (gave up after %d of %d tries): %w", namespace, name, i, tries, errors.Join(ctx.Err(), err))
			case <-time.After(interval):
			}
		}
		var pod *cni.Pod
		if pod, err = pods.GetPod(ctx, namespace, name); err == nil {
			return pod, nil
		}
	}
	return nil, fmt.Errorf("get pod %s/%s (%d tries): %w", namespace, name, tries, err)
}
