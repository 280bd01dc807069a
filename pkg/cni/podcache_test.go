package cni

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/httpserver"
)

// apiPods records the API server lookups the plugin falls back to.
type apiPods struct{ asked []string }

func (a *apiPods) GetPod(_ context.Context, ns, name string) (*Pod, error) {
	a.asked = append(a.asked, ns+"/"+name)
	p := &Pod{}
	p.Metadata.Name, p.Metadata.Namespace = name, ns
	p.Metadata.Labels = map[string]string{"from": "api"}
	return p, nil
}

// TestPodCacheFirst: with the node agent's socket in cni_agent_run_dir the
// plugin takes the pod from it; on a miss, or without the socket, it asks
// the API server.
func TestPodCacheFirst(t *testing.T) {
	dir := t.TempDir()
	conf := &Config{AgentRunDir: dir}
	api := &apiPods{}
	if got := withPodCache(conf, api); got != PodGetter(api) {
		t.Fatalf("without a socket: %T, want the API server's getter", got)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, PodCacheSocket))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- httpserver.Serve(ctx, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/namespaces/shop/pods/cached" {
				http.NotFound(w, r)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"name": "cached", "namespace": "shop", "labels": map[string]string{"from": "cache"}}})
		})}, ln, 5*time.Second) // a grace of 0 fails a connection not yet seen idle
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	pods := withPodCache(conf, api)
	for name, from := range map[string]string{"cached": "cache", "missed": "api"} {
		p, err := pods.GetPod(ctx, "shop", name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Metadata.Labels["from"] != from {
			t.Errorf("pod %s came from %s, want %s", name, p.Metadata.Labels["from"], from)
		}
	}
	if len(api.asked) != 1 || api.asked[0] != "shop/missed" {
		t.Errorf("API server asked for %v, want only the missed pod", api.asked)
	}

	// The plugin reads its kubeconfig only when the cache misses.
	kubeconfigs := 0
	conf.PodLookupTries = 1
	p := &Plugin{Pods: func(string) (PodGetter, error) { kubeconfigs++; return api, nil }}
	for name, want := range map[string]int{"cached": 0, "missed": 1} {
		kubeconfigs = 0
		pod, err := p.lookup(conf, "shop", name)
		if err != nil || pod.Metadata.Name != name {
			t.Fatalf("lookup %s: %v %v", name, pod, err)
		}
		if kubeconfigs != want {
			t.Errorf("lookup %s read the kubeconfig %d times, want %d", name, kubeconfigs, want)
		}
	}
}
