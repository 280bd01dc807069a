// Package proxyview renders istioctl's operator views of proxies — proxy-status
// and proxy-config — from istiod's debug endpoints and the agent's status port.
// It reads their JSON with types of its own and imports neither istiod's
// packages nor the agent's.
package proxyview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// TypeStatus and ProxyStatus are istiod's /debug/syncz, read from Skiff's
// format or Istio's (ParseSyncz).
type TypeStatus struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// ProxyStatus is one stream of one proxy.
type ProxyStatus struct {
	Proxy     string                `json:"proxy"`
	Generator string                `json:"generator,omitempty"`
	Types     map[string]TypeStatus `json:"types"`
	// ClusterID and IstioVersion are what the proxy reported (CLUSTER_ID
	// and ISTIO_VERSION node metadata); empty when it reported none.
	ClusterID    string `json:"cluster_id,omitempty"`
	IstioVersion string `json:"istio_version,omitempty"`
	// Istiod names the istiod that reported the stream (set by the caller;
	// WriteStatus's istiod argument stands in when it is empty).
	Istiod string `json:"-"`
}

// podName turns a node id (sidecar~IP~POD.NS~NS.svc.cluster.local) into POD.NS.
func podName(id string) string {
	parts := strings.Split(id, "~")
	if len(parts) == 4 {
		return parts[2]
	}
	return id
}

// InNamespace keeps the streams of proxies in namespace ns (node ids
// sidecar~IP~POD.NS~...).
func InNamespace(streams []ProxyStatus, ns string) []ProxyStatus {
	var out []ProxyStatus
	for _, s := range streams {
		if strings.HasSuffix(podName(s.Proxy), "."+ns) {
			out = append(out, s)
		}
	}
	return out
}

// proxyRow is one proxy's line of the status table.
type proxyRow struct {
	types            map[string]TypeStatus
	istiods          []string
	cluster, version string
}

// merge folds the streams of one proxy (the agent's NameTable stream, the
// proxy's own) into one status per type: any stream's state that has been
// sent wins over NOT SENT, and ERROR or STALE over SYNCED.
func merge(streams []ProxyStatus, istiod string) map[string]*proxyRow {
	rank := map[string]int{"NOT SENT": 0, "SYNCED": 1, "STALE": 2, "ERROR": 3}
	out := map[string]*proxyRow{}
	for _, s := range streams {
		row := out[s.Proxy]
		if row == nil {
			row = &proxyRow{types: map[string]TypeStatus{}}
			out[s.Proxy] = row
		}
		from := s.Istiod
		if from == "" {
			from = istiod
		}
		if !slices.Contains(row.istiods, from) {
			row.istiods = append(row.istiods, from)
		}
		if s.ClusterID != "" {
			row.cluster = s.ClusterID
		}
		if s.IstioVersion != "" {
			row.version = s.IstioVersion
		}
		for typ, st := range s.Types {
			if cur, ok := row.types[typ]; !ok || rank[st.Status] > rank[cur.Status] {
				row.types[typ] = st
			}
		}
	}
	return out
}

// WriteStatus prints the proxy-status table: NAME, CLUSTER, CDS, LDS, EDS,
// RDS, ECDS, ISTIOD, VERSION. ISTIOD is each stream's Istiod, else istiod
// (joined with commas when a proxy's streams are on several). CLUSTER and
// VERSION are what the proxy reported (its CLUSTER_ID and ISTIO_VERSION);
// when it reported none, VERSION is version if given, and "-" stands for
// what is not known.
func WriteStatus(w io.Writer, streams []ProxyStatus, istiod, version string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCLUSTER\tCDS\tLDS\tEDS\tRDS\tECDS\tISTIOD\tVERSION")
	merged := merge(streams, istiod)
	ids := make([]string, 0, len(merged))
	for id := range merged {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(podName(a), podName(b)) })
	for _, id := range ids {
		row := merged[id]
		st := func(typ string) string {
			if s, ok := row.types[typ]; ok {
				return s.Status
			}
			return "NOT SENT"
		}
		cluster, ver := row.cluster, row.version
		if ver == "" {
			ver = version
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", podName(id), orDash(cluster), st("CDS"), st("LDS"), st("EDS"), st("RDS"), st("ECDS"),
			strings.Join(row.istiods, ","), orDash(ver))
	}
	return tw.Flush()
}

// Dump is istiod's /debug/config_dump for one proxy: resources by type.
type Dump struct {
	Proxy  string                       `json:"proxy"`
	Config map[string][]json.RawMessage `json:"config"`
}

// ErrDumpFormat says istiod's /debug/config_dump is in neither Skiff's
// format nor Envoy's ConfigDump (Istio's istiod's).
var ErrDumpFormat = errors.New("istiod's /debug/config_dump is neither Skiff's format nor Envoy's ConfigDump")

// ErrNotConnected says the proxy has no stream to this istiod.
var ErrNotConnected = errors.New("not connected to istiod")

// ConfigDump finds the proxy named POD.NS (or by node id) and fetches its config dump.
func (c *Client) ConfigDump(ctx context.Context, pod string) (*Dump, error) {
	streams, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	id := ""
	for _, s := range streams {
		if s.Proxy == pod || podName(s.Proxy) == pod {
			id = s.Proxy
			break
		}
	}
	if id == "" {
		return nil, fmt.Errorf("proxy %q: %w", pod, ErrNotConnected)
	}
	body, err := c.getBody(ctx, c.Istiod, "/debug/config_dump?proxyID="+url.QueryEscape(id))
	if err != nil {
		return nil, err
	}
	// Istio's istiod answers with Envoy's ConfigDump ({"configs": [...]}).
	if d, ok, err := fromEnvoyDump(id, body); ok {
		return d, err
	}
	var d Dump
	if err := json.Unmarshal(body, &d); err != nil || (d.Proxy == "" && d.Config == nil) {
		return nil, fmt.Errorf("proxy %s: %w", id, ErrDumpFormat)
	}
	return &d, nil
}

// obj is a decoded resource.
type obj = map[string]any

func decode(raws []json.RawMessage) []obj {
	var out []obj
	for _, r := range raws {
		var o obj
		if json.Unmarshal(r, &o) == nil {
			out = append(out, o)
		}
	}
	return out
}

func str(o obj, path ...string) string {
	var cur any = o
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	case nil:
		return ""
	}
	return fmt.Sprint(cur)
}

// KnownKind reports whether WriteConfig prints kind.
func KnownKind(kind string) bool {
	switch kind {
	case "listeners", "listener", "l", "clusters", "cluster", "c", "routes", "route", "r", "endpoints", "endpoint", "e":
		return true
	}
	return false
}

// WriteConfig prints one kind of the dump: listeners, clusters, routes or endpoints.
func WriteConfig(w io.Writer, d *Dump, kind string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	switch kind {
	case "listeners", "listener", "l":
		fmt.Fprintln(tw, "NAME\tADDRESS\tPORT\tFILTER CHAINS")
		for _, l := range decode(d.Config["LDS"]) {
			chains, _ := l["filterChains"].([]any)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", str(l, "name"), str(l, "address", "socketAddress", "address"), str(l, "address", "socketAddress", "portValue"), len(chains))
		}
	case "clusters", "cluster", "c":
		fmt.Fprintln(tw, "SERVICE FQDN\tPORT\tSUBSET\tDIRECTION\tTYPE")
		for _, c := range decode(d.Config["CDS"]) {
			name := str(c, "name")
			dir, port, subset, host := "-", "-", "-", name
			if p := strings.Split(name, "|"); len(p) == 4 {
				dir, port, subset, host = p[0], p[1], p[2], p[3]
				if subset == "" {
					subset = "-"
				}
			}
			typ := str(c, "type")
			if typ == "" && str(c, "edsClusterConfig", "serviceName") != "" || c["edsClusterConfig"] != nil {
				typ = "EDS"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", host, port, subset, dir, typ)
		}
	case "routes", "route", "r":
		fmt.Fprintln(tw, "NAME\tVIRTUAL HOSTS\tDOMAINS")
		for _, r := range decode(d.Config["RDS"]) {
			vhs, _ := r["virtualHosts"].([]any)
			var domains []string
			for _, vh := range vhs {
				if m, ok := vh.(map[string]any); ok {
					if ds, ok := m["domains"].([]any); ok && len(ds) > 0 {
						domains = append(domains, fmt.Sprint(ds[0]))
					}
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", str(r, "name"), len(vhs), strings.Join(domains, ","))
		}
	case "endpoints", "endpoint", "e":
		fmt.Fprintln(tw, "ENDPOINT\tSTATUS\tCLUSTER")
		for _, e := range decode(d.Config["EDS"]) {
			locs, _ := e["endpoints"].([]any)
			for _, loc := range locs {
				lbs, _ := loc.(map[string]any)["lbEndpoints"].([]any)
				for _, lb := range lbs {
					m, _ := lb.(map[string]any)
					addr := str(m, "endpoint", "address", "socketAddress", "address") + ":" + str(m, "endpoint", "address", "socketAddress", "portValue")
					health := str(m, "healthStatus")
					if health == "" {
						health = "HEALTHY"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", addr, health, str(e, "clusterName"))
				}
			}
		}
	default:
		return fmt.Errorf("unknown kind %q: want listeners, clusters, routes, endpoints or secret", kind)
	}
	return tw.Flush()
}

// Secret mirrors one entry of the agent's /debug/certs: what it reports of
// one certificate resource (never the key).
type Secret struct {
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	Valid     bool      `json:"valid"`
	Serial    string    `json:"serial"`
	NotAfter  time.Time `json:"not_after"`
	NotBefore time.Time `json:"not_before"`
}

// Secrets fetches the agent's /debug/certs (agent is its status address, "http://POD_IP:15020").
func (c *Client) Secrets(ctx context.Context, agent string) ([]Secret, error) {
	var out []Secret
	return out, c.get(ctx, agent, "/debug/certs", &out)
}

// WriteSecrets prints the secret table: RESOURCE NAME, TYPE, STATUS, VALID CERT, SERIAL NUMBER, NOT AFTER, NOT BEFORE.
func WriteSecrets(w io.Writer, secrets []Secret) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE NAME\tTYPE\tSTATUS\tVALID CERT\tSERIAL NUMBER\tNOT AFTER\tNOT BEFORE")
	for _, s := range secrets {
		fmt.Fprintf(tw, "%s\t%s\tACTIVE\t%t\t%s\t%s\t%s\n", s.Name, s.Type, s.Valid, s.Serial,
			s.NotAfter.UTC().Format(time.RFC3339), s.NotBefore.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// orDash stands "-" for an unknown value.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
