package cni

import (
	"bufio"
	"context"
	"fmt"
	"io"
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

// cacheClient asks the node agent's socket for a pod: one GET on a new
// connection, written and read directly. The plugin asks once per process,
// so an http.Transport's pooling and goroutines would only add start-up
// time.
type cacheClient struct{ sock string }

func (c cacheClient) GetPod(ctx context.Context, namespace, name string) (*Pod, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.sock)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	path := podPath(namespace, name)
	req := "GET " + path + " HTTP/1.1\r\nHost: node-agent\r\nUser-Agent: " + userAgent +
		"\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, fmt.Errorf("pod cache %s: %w", c.sock, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, fmt.Errorf("pod cache %s: %w", c.sock, err)
	}
	defer resp.Body.Close()
	return readPod("unix:"+c.sock+path, resp)
}

// cacheFor is the node agent's cache when its socket exists, or nil.
func cacheFor(conf *Config) PodGetter {
	sock := conf.PodCachePath()
	if sock == "" {
		return nil
	}
	if _, err := os.Stat(sock); err != nil {
		return nil
	}
	return cacheClient{sock: sock}
}

// fromCache is the pod from the node agent's cache, or nil when there is no
// cache or it does not answer with the pod in time.
func fromCache(conf *Config, namespace, name string) *Pod {
	c := cacheFor(conf)
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cacheTimeout)
	defer cancel()
	p, err := c.GetPod(ctx, namespace, name)
	if err != nil {
		return nil
	}
	return p
}

// cachedPods asks the node agent's cache first and the API server when the
// cache does not answer with the pod.
type cachedPods struct{ cache, api PodGetter }

// withPodCache puts the node agent's cache in front of pods when its
// socket exists.
func withPodCache(conf *Config, pods PodGetter) PodGetter {
	c := cacheFor(conf)
	if c == nil {
		return pods
	}
	return cachedPods{cache: c, api: pods}
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
