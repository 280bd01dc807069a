package proxyview

import (
	"encoding/json"
	"fmt"
)

// dumpList is where one list of a ConfigDump part is (its names) and the
// path from a list entry to the resource (each step under any of its
// names). Field names are camelCase, as Istio's istiod writes them (and
// as WriteConfig reads the resources).
type dumpList struct {
	names []string
	path  [][]string
}

// envoyDumpParts says where Envoy's ConfigDump (what Istio's istiod answers
// /debug/config_dump with) keeps each type's resources, by part @type,
// with the short type name of a Dump.
var envoyDumpParts = map[string]struct {
	short string
	lists []dumpList
}{
	"type.googleapis.com/envoy.admin.v3.ClustersConfigDump": {"CDS", []dumpList{
		{[]string{"staticClusters"}, [][]string{{"cluster"}}},
		{[]string{"dynamicActiveClusters"}, [][]string{{"cluster"}}},
	}},
	"type.googleapis.com/envoy.admin.v3.ListenersConfigDump": {"LDS", []dumpList{
		{[]string{"staticListeners"}, [][]string{{"listener"}}},
		{[]string{"dynamicListeners"}, [][]string{{"activeState"}, {"listener"}}},
	}},
	"type.googleapis.com/envoy.admin.v3.RoutesConfigDump": {"RDS", []dumpList{
		{[]string{"staticRouteConfigs"}, [][]string{{"routeConfig"}}},
		{[]string{"dynamicRouteConfigs"}, [][]string{{"routeConfig"}}},
	}},
	"type.googleapis.com/envoy.admin.v3.EndpointsConfigDump": {"EDS", []dumpList{
		{[]string{"staticEndpointConfigs"}, [][]string{{"endpointConfig"}}},
		{[]string{"dynamicEndpointConfigs"}, [][]string{{"endpointConfig"}}},
	}},
}

// fromEnvoyDump reads Envoy's ConfigDump in JSON ({"configs": [...]}, field
// names in camelCase as Istio's istiod writes them) into a Dump of proxy.
// ok is false when body is not one.
func fromEnvoyDump(proxy string, body []byte) (d *Dump, ok bool, err error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil, false, nil
	}
	raw, ok := top["configs"]
	if !ok {
		return nil, false, nil
	}
	var parts []obj
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, true, fmt.Errorf("envoy config dump: configs: %w", err)
	}
	d = &Dump{Proxy: proxy, Config: map[string][]json.RawMessage{}}
	for _, part := range parts {
		where, known := envoyDumpParts[str(part, "@type")]
		if !known {
			continue
		}
		for _, l := range where.lists {
			for _, e := range first(part, l.names) {
				entry, _ := e.(map[string]any)
				if res := resource(entry, l.path); res != nil {
					b, err := json.Marshal(res)
					if err != nil {
						return nil, true, fmt.Errorf("envoy config dump: %s: %w", where.short, err)
					}
					d.Config[where.short] = append(d.Config[where.short], b)
				}
			}
		}
	}
	return d, true, nil
}

// first returns the list under the first of names that o has.
func first(o obj, names []string) []any {
	for _, n := range names {
		if l, ok := o[n].([]any); ok {
			return l
		}
	}
	return nil
}

// resource follows path from entry, each step under the first of its
// names that is there; nil when a step is missing.
func resource(entry obj, path [][]string) map[string]any {
	cur := entry
	for _, step := range path {
		var next map[string]any
		for _, name := range step {
			if m, ok := cur[name].(map[string]any); ok {
				next = m
				break
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}
