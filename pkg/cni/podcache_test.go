package cni

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
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

// TestPodCacheFirst: with the node agent's file of the pod in
// cni_agent_run_dir/pods, and the node agent holding the dir's owner lock,
// the plugin takes the pod from the file, without its helper; without the
// file, without the lock, with a file of another pod of that name (its uid
// differs from CNI_ARGS') or one it cannot read, it runs the helper with
// the kubeconfig and retries of its configuration.
func TestPodCacheFirst(t *testing.T) {
	dir := t.TempDir()
	conf := &Config{AgentRunDir: dir, PodLookupTries: 3, PodLookupInterval: "50ms"}
	f := &fallbacks{}
	p := &Plugin{Fallback: f.lookup}
	lookup := func(name, uid, from string) {
		t.Helper()
		pod, err := p.lookup(conf, slog.New(slog.DiscardHandler), "shop", name, uid)
		if err != nil || pod.Metadata.Name != name {
			t.Fatalf("lookup %s: %v %v", name, pod, err)
		}
		if pod.Metadata.Labels["from"] != from {
			t.Errorf("pod %s (uid %q) came from %s, want %s", name, uid, pod.Metadata.Labels["from"], from)
		}
	}
	lookup("cached", "", "api") // no cache dir yet
	cache := filepath.Join(dir, PodCacheDir)
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"cached": `{"metadata":{"name":"cached","namespace":"shop","uid":"u-1","labels":{"from":"cache"}}}`,
		"broken": `{"metadata":`,
		"other":  `{"metadata":{"name":"someone-else","namespace":"shop","labels":{"from":"cache"}}}`,
	} {
		if err := os.WriteFile(PodFile(cache, "shop", name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lookup("cached", "", "api") // files nobody keeps: no owner lock
	owner, err := os.OpenFile(filepath.Join(cache, PodCacheOwner), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(owner.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	lookup("cached", "", "cache")
	lookup("cached", "u-1", "cache")
	lookup("cached", "u-2", "api") // a pod of the same name, recreated
	lookup("broken", "", "api")
	lookup("other", "", "api")
	lookup("missed", "", "api")
	owner.Close() // install-cni gone: its files are not trusted
	lookup("cached", "u-1", "api")
	want := Lookup{Kubeconfig: filepath.Join(dir, KubeconfigName), Namespace: "shop", Tries: 3, Interval: 50 * time.Millisecond}
	var asked []string
	for _, l := range f.asked {
		asked = append(asked, l.Name)
		want.Name = l.Name
		if l != want {
			t.Errorf("helper asked %+v, want %+v", l, want)
		}
	}
	if !slices.Equal(asked, []string{"cached", "cached", "cached", "broken", "other", "missed", "cached"}) {
		t.Errorf("helper asked for %v", asked)
	}
}

// TestPodFile: a name that could leave the cache dir, or be two pods' file,
// has none.
func TestPodFile(t *testing.T) {
	if got := PodFile("/run/pods", "shop", "web-0.a"); got != "/run/pods/shop_web-0.a.json" {
		t.Errorf("PodFile = %q", got)
	}
	for _, bad := range [][2]string{{"", "p"}, {"ns", ""}, {"..", "p"}, {"ns", ".."}, {"a/b", "p"}, {"ns", "../p"}, {"a_b", "p"}, {"ns", "p\x00"}} {
		if got := PodFile("/run/pods", bad[0], bad[1]); got != "" {
			t.Errorf("PodFile(%q, %q) = %q, want none", bad[0], bad[1], got)
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
		_, err := p.lookup(conf, slog.New(slog.DiscardHandler), "shop", "a", "")
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
