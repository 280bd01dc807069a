package debug_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/istiodtest"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const (
	reviewsID = "sidecar~127.0.0.41~reviews-v1-0.default~default.svc.cluster.local"
	// target is what the proxyless app dials (its LDS name).
	target = "ratings.default.svc.cluster.local:9080"
)

func startIstiod(t *testing.T) *istiod.Istiod {
	t.Helper()
	d, _ := istiodtest.Start(t, nil)
	return d
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v\n%s", url, err, b)
		}
	}
	return resp.StatusCode
}

// stream is one ADS client of the test: its requests and the connection
// id istiod gave it.
type stream struct {
	name string
	meta map[string]string
	reqs []struct {
		typ   string
		names []string
	}
}

// The agent's own stream (NameTable, all clusters; no GENERATOR) and the
// proxyless app's (GENERATOR=grpc, its listener by name), as
// pkg/agent/xdsproxy and grpc-go open them.
var (
	agentStream = stream{name: "agent", reqs: []struct {
		typ   string
		names []string
	}{{gen.NameTableType, nil}, {gen.ClusterType, nil}}}
	appStream = stream{name: "app", meta: map[string]string{"GENERATOR": "grpc"}, reqs: []struct {
		typ   string
		names []string
	}{{gen.ListenerType, []string{target}}}}
	// appAgain is the app reconnected while its old stream lingers.
	appAgain = stream{name: "app again", meta: appStream.meta, reqs: appStream.reqs}
	// envoyStream is a sidecar's Envoy through the agent.
	envoyStream = stream{name: "envoy", reqs: []struct {
		typ   string
		names []string
	}{{gen.ClusterType, nil}, {gen.ListenerType, nil}}}
)

// open connects s as reviewsID, sends its requests and waits for a
// response to each; it returns the connection id istiod reports for it.
func open(ctx context.Context, t *testing.T, d *istiod.Istiod, s stream) string {
	t.Helper()
	before := map[string]bool{}
	for _, id := range connections(t, d) {
		before[id] = true
	}
	c, err := xdstest.DialSotW(ctx, d.Addr("grpc"), xdstest.Node(reviewsID, s.meta))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, r := range s.reqs {
		if err := c.Subscribe(r.typ, r.names, 10*time.Second); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	var id string
	polltest.Until(t, s.name+" stream in syncz", func() bool {
		for _, c := range connections(t, d) {
			if !before[c] {
				id = c
				return true
			}
		}
		return false
	})
	return id
}

// connections lists the connection ids of reviewsID in syncz.
func connections(t *testing.T, d *istiod.Istiod) []string {
	var all []xds.ProxyStatus
	if code := getJSON(t, "http://"+d.Addr("debug")+"/debug/syncz", &all); code != http.StatusOK {
		t.Fatalf("syncz: %d", code)
	}
	var out []string
	for _, ps := range all {
		if ps.Proxy == reviewsID {
			out = append(out, ps.ConnectionID)
		}
	}
	return out
}

// TestConfigDumpIsTheAppsStream connects the agent's own stream and an
// app's (proxyless or Envoy) under one node id, in either order:
// config_dump answers for the app's, never the agent's (which, as a sidecar
// without names, would get virtualOutbound and the rest), and for the
// newest of two app streams.
func TestConfigDumpIsTheAppsStream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		streams []stream
		want    string
		wantLDS string
	}{
		{name: "agent first", streams: []stream{agentStream, appStream}, want: "app", wantLDS: target},
		{name: "app first", streams: []stream{appStream, agentStream}, want: "app", wantLDS: target},
		{name: "app reconnected", streams: []stream{agentStream, appStream, appAgain}, want: "app again", wantLDS: target},
		{name: "envoy", streams: []stream{agentStream, envoyStream}, want: "envoy", wantLDS: "virtualOutbound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startIstiod(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ids := map[string]string{}
			for _, s := range tc.streams {
				ids[s.name] = open(ctx, t, d, s)
			}
			var dump struct {
				ConnectionID string                       `json:"connection_id"`
				Config       map[string][]json.RawMessage `json:"config"`
			}
			if code := getJSON(t, "http://"+d.Addr("debug")+"/debug/config_dump?proxyID="+reviewsID, &dump); code != http.StatusOK {
				t.Fatalf("config_dump: %d", code)
			}
			if dump.ConnectionID != ids[tc.want] {
				t.Errorf("config_dump answered for %s, want %s's stream (streams: %v)", dump.ConnectionID, tc.want, ids)
			}
			var names []string
			for _, l := range dump.Config["LDS"] {
				var v struct{ Name string }
				_ = json.Unmarshal(l, &v)
				names = append(names, v.Name)
			}
			if !slices.Contains(names, tc.wantLDS) || tc.wantLDS == target && len(names) != 1 {
				t.Errorf("LDS names %q, want %s", names, tc.wantLDS)
			}
		})
	}
}
