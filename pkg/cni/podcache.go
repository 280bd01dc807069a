package cni

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// PodCacheSocket is the node agent's pod cache, a Unix socket in
// cni_agent_run_dir: install-cni keeps a watch-fed copy of the node's pods
// and answers the API's pod GET there, so the plugin needs no TLS
// handshake with the API server for each pod.
const PodCacheSocket = "pods.sock"

// cacheTimeout bounds one question to the node agent's cache; a miss, an
// error or a slow answer falls back to the API server.
const cacheTimeout = 200 * time.Millisecond

// PodCachePath is where the plugin finds the node agent's pod cache, or ""
// without a cni_agent_run_dir.
func (c *Config) PodCachePath() string {
	if c.AgentRunDir == "" {
		return ""
	}
	return filepath.Join(c.AgentRunDir, PodCacheSocket)
}

// newCacheClient is an API client for the node agent's socket: it serves
// the same pod GET as the API server.
func newCacheClient(sock string) *apiClient {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	return &apiClient{server: "http://node-agent", http: &http.Client{Transport: &http.Transport{DialContext: dial}}}
}

// cachedPods asks the node agent's cache first and the API server when the
// cache does not answer with the pod.
type cachedPods struct{ cache, api PodGetter }

// withPodCache puts the node agent's cache in front of pods when its
// socket exists.
func withPodCache(conf *Config, pods PodGetter) PodGetter {
	sock := conf.PodCachePath()
	if sock == "" {
		return pods
	}
	if _, err := os.Stat(sock); err != nil {
		return pods
	}
	return cachedPods{cache: newCacheClient(sock), api: pods}
}

// GetPod returns the cache's pod, or else the API server's.
func (c cachedPods) GetPod(ctx context.Context, namespace, name string) (*Pod, error) {
	cctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	p, err := c.cache.GetPod(cctx, namespace, name)
	cancel()
	if err == nil {
		return p, nil
	}
	return c.api.GetPod(ctx, namespace, name)
}
