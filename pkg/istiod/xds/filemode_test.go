package xds_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/skiff-mesh/skiff/pkg/agent/xdsproxy"
	"github.com/skiff-mesh/skiff/pkg/grpcsock/grpcsocktest"
	"github.com/skiff-mesh/skiff/pkg/grpcwire"
	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/nds"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// fileMesh copies the sample mesh into a directory of the test's own and
// adds files: name to content.
func fileMesh(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	src := istiodtest.MeshDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, e.Name()), string(b))
	}
	for n, c := range files {
		writeFile(t, filepath.Join(dir, n), c)
	}
	return dir
}

// writeFile replaces p atomically (a rename, as editors and kubectl cp do).
func writeFile(t *testing.T, p, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// TestNameTableFollowsHeadlessEndpointsFileMode runs istiod on a directory
// and a pilot-agent xDS proxy keeping its own NameTable (with CDS, as the
// DNS proxy of an agent without Envoy asks), then edits the EndpointSlice file of a headless service:
// the agent's NameTable gets the new address, twice over (the second push
// inherits from a push context that itself inherited). With a debounce of
// an hour, the first edit after a quiet spell still arrives: it is pushed
// at once, ahead of the debounce.
func TestNameTableFollowsHeadlessEndpointsFileMode(t *testing.T) {
	for _, tc := range []struct {
		name       string
		files      func(ip string) map[string]string
		noDebounce bool
		hourLong   bool
	}{
		{"slice file", func(ip string) map[string]string {
			return map[string]string{"db.yaml": xdstest.HeadlessDB, "db-endpoints.yaml": xdstest.DBSlice(ip)}
		}, false, false},
		{"service and slice in one file", func(ip string) map[string]string {
			return map[string]string{"db.yaml": xdstest.HeadlessDB + "---\n" + xdstest.DBSlice(ip)}
		}, false, false},
		{"slice file, endpoint changes not debounced", func(ip string) map[string]string {
			return map[string]string{"db.yaml": xdstest.HeadlessDB, "db-endpoints.yaml": xdstest.DBSlice(ip)}
		}, true, false},
		{"slice file, a debounce of an hour", func(ip string) map[string]string {
			return map[string]string{"db.yaml": xdstest.HeadlessDB, "db-endpoints.yaml": xdstest.DBSlice(ip)}
		}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fileMesh(t, tc.files("127.0.0.61"))
			d, ctx := istiodtest.Start(t, func(c *istiod.Config) {
				c.ConfigDir, c.EDSDebounce = dir, !tc.noDebounce
				if tc.hourLong {
					c.DebounceAfter, c.DebounceMax = time.Hour, time.Hour
				}
			})
			conn, err := grpcwire.Dial(d.Addr("grpc"), grpcwire.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			var mu sync.Mutex
			var db []string
			p := xdsproxy.New(xdsproxy.Options{Upstream: conn, Node: marshalNode(t, xdstest.Node(productpage, nil)), NoEnvoy: true,
				OnNameTable: func(nt *nds.NameTable) {
					mu.Lock()
					db = nt.GetTable()[xdstest.DBHost].GetIps()
					mu.Unlock()
				},
				OnClusters: func([]string) {}}, slog.New(slog.DiscardHandler))
			ctx, cancel := context.WithCancel(ctx)
			served := make(chan error, 1)
			ln := grpcsocktest.Listen(t, filepath.Join(t.TempDir(), "xds.sock"))
			go func() { served <- p.Serve(ctx, ln) }()
			t.Cleanup(func() { cancel(); <-served })
			has := func(ip string) func() bool {
				return func() bool {
					mu.Lock()
					defer mu.Unlock()
					return slices.Equal(db, []string{ip})
				}
			}
			polltest.Within(t, wait, "agent name table with db at 127.0.0.61", has("127.0.0.61"))
			edits := []string{"127.0.0.62", "127.0.0.63"}
			if tc.hourLong {
				edits = edits[:1] // the second would wait the hour
			}
			for _, ip := range edits {
				for n, c := range tc.files(ip) {
					writeFile(t, filepath.Join(dir, n), c)
				}
				polltest.Within(t, wait, "agent name table with db at "+ip, has(ip))
			}
		})
	}
}

// marshalNode is n as the agent sends it on its own stream.
func marshalNode(t *testing.T, n proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
