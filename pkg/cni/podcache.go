package cni

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// PodCacheDir is the node agent's pod cache, a directory in
// cni_agent_run_dir: install-cni keeps a watch-fed copy of the node's pods
// there, one JSON file per pod (PodFile), so the plugin reads its pod with
// one open and read: no TLS handshake with the API server, and no round
// trip to another process, which costs a trip through the scheduler each
// way when many pods start at once.
const PodCacheDir = "pods"

// PodCacheOwner is the file in the cache dir that install-cni holds an
// exclusive flock on while it keeps the files current. The kernel drops the
// lock when the process ends, however it ends, so a plugin that can take
// the lock knows nobody keeps the files and does not trust them.
const PodCacheOwner = ".owner"

// PodCachePath is where the plugin finds the node agent's pod cache, or ""
// without a cni_agent_run_dir.
func (c *Config) PodCachePath() string {
	if c.AgentRunDir == "" {
		return ""
	}
	return filepath.Join(c.AgentRunDir, PodCacheDir)
}

// PodFile is the file of pod namespace/name in the cache dir, or "" for a
// name that could not be a file of its own there (Kubernetes allows
// neither "_" nor "/" in namespaces and pod names).
func PodFile(dir, namespace, name string) string {
	for _, s := range []string{namespace, name} {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/_\x00") {
			return ""
		}
	}
	return filepath.Join(dir, namespace+"_"+name+".json")
}

// fromCache is the pod from the node agent's cache, or nil when there is no
// cache, nobody keeps it current, it does not hold the pod, or it holds
// another pod of that name (uid, from CNI_ARGS, differs; "" skips the
// check).
func fromCache(conf *Config, namespace, name, uid string) *Pod {
	dir := conf.PodCachePath()
	if dir == "" {
		return nil
	}
	path := PodFile(dir, namespace, name)
	if path == "" || !kept(dir) {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	p, err := decodePod(b)
	if err != nil || p.Metadata.Name != name || p.Metadata.Namespace != namespace {
		return nil
	}
	if uid != "" && p.Metadata.UID != uid {
		return nil
	}
	return p
}

// kept reports whether a live install-cni holds the cache dir's owner lock:
// a shared lock on PodCacheOwner cannot be taken while it does.
func kept(dir string) bool {
	f, err := os.Open(filepath.Join(dir, PodCacheOwner))
	if err != nil {
		return false
	}
	defer f.Close() // drops the lock if we took it
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == syscall.EWOULDBLOCK
}
