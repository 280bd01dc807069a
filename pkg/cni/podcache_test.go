package cni

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/skiff-mesh/skiff/pkg/httpserver"
)

// fallbacks records the lookups the plugin hands to its helper.
type fallbacks struct{ asked []Lookup }

func (f *fallbacks) lookup(_ context.Context, l Lookup) (*Pod, error) {
	f.asked = append(f.asked, l)
	p := &Pod{}
	p.Metadata.Name, p.Metadata.Namespace = l.Name, l.Namespace
	p.Metadata.Labels = map[string]string{"from": "api"}
	return p, nil
}

// serveCache serves pods on dir's pods.sock with Go's HTTP server, as
// install-cni does; the pod "big" is larger than the server's 2 KiB
// buffer, which an HTTP/1.1 answer would send chunked.
func serveCache(t *testing.T, dir string) {
	ln, err := net.Listen("unix", filepath.Join(dir, PodCacheSocket))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- httpserver.Serve(ctx, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/shop/pods/")
			if !ok || (name != "cached" && name != "big") {
				http.NotFound(w, r)
				return
			}
			labels := map[string]string{"from": "cache", "pad": strings.Repeat("x", 10)}
			if name == "big" {
				labels["pad"] = strings.Repeat("x", 64<<10)
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"name": name, "namespace": "shop", "labels": labels}})
		})}, ln, 5*time.Second) // a grace of 0 fails a connection not yet seen idle
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
}

// TestPodCacheFirst: with the node agent's socket in cni_agent_run_dir the
// plugin takes the pod from it, without its helper; on a miss, or without
// the socket, it runs the helper with the kubeconfig and retries of its
// configuration.
func TestPodCacheFirst(t *testing.T) {
	dir := t.TempDir()
	conf := &Config{AgentRunDir: dir, PodLookupTries: 3, PodLookupInterval: "50ms"}
	f := &fallbacks{}
	p := &Plugin{Fallback: f.lookup}
	lookup := func(name, from string) {
		t.Helper()
		pod, err := p.lookup(conf, "shop", name)
		if err != nil || pod.Metadata.Name != name {
			t.Fatalf("lookup %s: %v %v", name, pod, err)
		}
		if pod.Metadata.Labels["from"] != from {
			t.Errorf("pod %s came from %s, want %s", name, pod.Metadata.Labels["from"], from)
		}
	}
	lookup("cached", "api") // no socket yet
	serveCache(t, dir)
	lookup("cached", "cache")
	lookup("big", "cache")
	lookup("missed", "api")
	want := Lookup{Kubeconfig: filepath.Join(dir, KubeconfigName), Namespace: "shop", Tries: 3, Interval: 50 * time.Millisecond}
	if len(f.asked) != 2 {
		t.Fatalf("helper asked %d times (%+v), want for the pod before the socket and the missed one", len(f.asked), f.asked)
	}
	for i, name := range []string{"cached", "missed"} {
		want.Name = name
		if f.asked[i] != want {
			t.Errorf("helper asked %+v, want %+v", f.asked[i], want)
		}
	}
}

// TestLookupErrors: the helper's failures become CNI errors, a kubeconfig
// it cannot use apart from a pod it cannot find.
func TestLookupErrors(t *testing.T) {
	conf := &Config{AgentRunDir: t.TempDir(), PodLookupTries: 1}
	for _, tc := range []struct {
		err  error
		code uint
	}{
		{&KubeconfigError{Err: errors.New("read kubeconfig: no such file")}, types.ErrInvalidNetworkConfig},
		{errors.New("get pod shop/a (1 tries): not found"), types.ErrTryAgainLater},
	} {
		p := &Plugin{Fallback: func(context.Context, Lookup) (*Pod, error) { return nil, tc.err }}
		_, err := p.lookup(conf, "shop", "a")
		var ce *types.Error
		if !errors.As(err, &ce) || ce.Code != tc.code || !strings.Contains(ce.Details, tc.err.Error()) {
			t.Errorf("%v: got %#v, want code %d with the helper's message", tc.err, err, tc.code)
		}
	}
}

// TestLookupArgs: the helper reads back what the plugin writes, and refuses
// a command line it cannot honour, naming the flag.
func TestLookupArgs(t *testing.T) {
	l := Lookup{Kubeconfig: "/var/run/istio-cni/istio-cni-kubeconfig", Namespace: "-odd", Name: "p", Tries: 30, Interval: 1500 * time.Millisecond}
	got, err := ParseLookup(l.Args())
	if err != nil || got != l {
		t.Fatalf("ParseLookup(%q) = %+v, %v; want %+v", l.Args(), got, err, l)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubeconfig", "k", "ns"}, "NAMESPACE NAME"},
		{[]string{"ns", "p"}, "--kubeconfig"},
		{[]string{"--kubeconfig", "k", "--tries", "0", "ns", "p"}, "--tries: 0"},
		{[]string{"--kubeconfig", "k", "--interval", "-1s", "ns", "p"}, "--interval: -1s"},
		{[]string{"--kubeconfig", "k", "--interval", "soon", "ns", "p"}, "soon"},
	} {
		if _, err := ParseLookup(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseLookup(%q) = %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}
