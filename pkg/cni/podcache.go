package cni

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
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

// UserAgent is the plugin's User-Agent towards the node agent, and its
// helper's towards the API server.
const UserAgent = "skiff-cni"

// PodCachePath is where the plugin finds the node agent's pod cache, or ""
// without a cni_agent_run_dir.
func (c *Config) PodCachePath() string {
	if c.AgentRunDir == "" {
		return ""
	}
	return filepath.Join(c.AgentRunDir, PodCacheSocket)
}

// PodPath is the API's path of one pod.
func PodPath(namespace, name string) string {
	return "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(name)
}

// cacheClient asks the node agent's socket for a pod: one HTTP/1.0 GET on
// a new connection, written and read directly (readAnswer). The plugin asks
// once per process, so an HTTP client's pooling, goroutines and linked code
// would only add start-up time.
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
	path := PodPath(namespace, name)
	req := "GET " + path + " HTTP/1.0\r\nHost: node-agent\r\nUser-Agent: " + UserAgent +
		"\r\nAccept: application/json\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, fmt.Errorf("pod cache %s: %w", c.sock, err)
	}
	a, err := readAnswer(bufio.NewReader(conn))
	if err != nil {
		return nil, fmt.Errorf("pod cache %s: %w", c.sock, err)
	}
	return DecodePod("unix:"+c.sock+path, a.status, a.reason, a.body)
}

// fromCache is the pod from the node agent's cache, or nil when there is no
// cache or it does not answer with the pod in time.
func fromCache(conf *Config, namespace, name string) *Pod {
	sock := conf.PodCachePath()
	if sock == "" {
		return nil
	}
	if _, err := os.Stat(sock); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cacheTimeout)
	defer cancel()
	p, err := cacheClient{sock: sock}.GetPod(ctx, namespace, name)
	if err != nil {
		return nil
	}
	return p
}
