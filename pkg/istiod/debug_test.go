package istiod_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

const productpage = "sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local"

func get(t *testing.T, url string) (int, string) {
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
	return resp.StatusCode, string(b)
}

// syncz reads /debug/syncz and returns the status of typ for proxy id.
func syncz(t *testing.T, d *istiod.Istiod, id, typ string) string {
	t.Helper()
	code, body := get(t, "http://"+d.Addr("debug")+"/debug/syncz")
	if code != http.StatusOK {
		t.Fatalf("syncz: %d %s", code, body)
	}
	var all []xds.ProxyStatus
	if err := json.Unmarshal([]byte(body), &all); err != nil {
		t.Fatal(err)
	}
	for _, ps := range all {
		if ps.Proxy == id {
			return ps.Types[typ].Status
		}
	}
	return "absent"
}

func waitSyncz(t *testing.T, d *istiod.Istiod, typ, want string) {
	t.Helper()
	polltest.Until(t, "syncz "+typ+" "+want, func() bool { return syncz(t, d, productpage, typ) == want })
}

func TestDebugEndpoints(t *testing.T) {
	dir := meshDir(t)
	writeFile(t, filepath.Join(dir, "broken.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: broken}\nspec: {ports: [{name: http, port: 0}]}\n")
	d := startIstiod(t, istiod.Config{ConfigDir: dir})
	base := "http://" + d.Addr("debug")

	if code, _ := get(t, "http://"+d.Addr("monitoring")+"/ready"); code != http.StatusOK {
		t.Fatalf("/ready: %d", code)
	}
	// Where Istio's istioctl version reads the control plane's version.
	if code, body := get(t, "http://"+d.Addr("monitoring")+"/version"); code != http.StatusOK ||
		!strings.Contains(body, `"clientVersion":{"version":"`+istiod.IstioVersion+`","revision":`) {
		t.Fatalf("/version: %d %s", code, body)
	}
	code, body := get(t, base+"/debug/configz")
	if code != http.StatusOK || !strings.Contains(body, "broken.yaml: document 1 (Service default/broken): spec.ports[0].port: 0") || !strings.Contains(body, `"reviews"`) {
		t.Fatalf("configz: %d %.400s", code, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := xdstest.DialSotW(ctx, d.Addr("grpc"), xdstest.Node(productpage, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Request(gen.ClusterType, nil, "", "", nil); err != nil {
		t.Fatal(err)
	}
	cds, err := c.Recv(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitSyncz(t, d, "CDS", xds.StatusStale)
	waitSyncz(t, d, "LDS", xds.StatusNotSent)
	if err := c.Ack(cds, nil); err != nil {
		t.Fatal(err)
	}
	waitSyncz(t, d, "CDS", xds.StatusSynced)

	// A new service changes CDS; the proxy rejects it.
	writeFile(t, filepath.Join(dir, "details.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: details}\nspec: {clusterIP: 10.96.0.14, ports: [{name: http, port: 9080}]}\n")
	cds2, err := c.Recv(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Nack(cds2, nil, errors.New("bad cluster")); err != nil {
		t.Fatal(err)
	}
	waitSyncz(t, d, "CDS", xds.StatusError)

	code, body = get(t, base+"/debug/config_dump?proxyID="+productpage)
	if code != http.StatusOK || !strings.Contains(body, "outbound|9080||details.default.svc.cluster.local") || !strings.Contains(body, `"virtualInbound"`) {
		t.Fatalf("config_dump: %d %.300s", code, body)
	}
	if code, body := get(t, base+"/debug/config_dump?proxyID=productpage-0.default"); code != http.StatusOK {
		t.Errorf("config_dump by proxy ID (POD.NS, as Istio accepts): %d %.200s", code, body)
	}
	if code, _ := get(t, base+"/debug/config_dump?proxyID=nobody"); code != http.StatusNotFound {
		t.Errorf("config_dump of an unknown proxy: %d, want 404", code)
	}
	_, metrics := get(t, "http://"+d.Addr("monitoring")+"/metrics")
	for _, m := range []string{"pilot_xds 1", `pilot_total_xds_rejects{type="cds"} 1`, `pilot_xds_pushes{type="cds"} 2`, "pilot_services 7", "pilot_config_rejected 1"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
}
