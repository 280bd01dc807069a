package xds

import (
	"slices"
	"strings"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
)

// configStatus maps a watch's state to CSDS's.
func configStatus(s string) statusv3.ConfigStatus {
	switch s {
	case StatusSynced:
		return statusv3.ConfigStatus_SYNCED
	case StatusStale:
		return statusv3.ConfigStatus_STALE
	case StatusError:
		return statusv3.ConfigStatus_ERROR
	}
	return statusv3.ConfigStatus_NOT_SENT
}

// clientConfig is the connection as Istio's syncz reports a proxy: the
// node (id: the proxy ID, POD.NAMESPACE; metadata CLUSTER_ID, NAMESPACE,
// ISTIO_VERSION) and, per
// subscribed type in type URL order, its status, when it was last sent
// and what went wrong.
func (c *Connection) clientConfig() *statusv3.ClientConfig {
	meta := map[string]*structpb.Value{}
	for k, v := range map[string]string{"CLUSTER_ID": c.clusterID, "NAMESPACE": c.proxy.Namespace, "ISTIO_VERSION": c.istioVersion} {
		if v != "" {
			meta[k] = structpb.NewStringValue(v)
		}
	}
	cc := &statusv3.ClientConfig{Node: &corev3.Node{Id: proxyID(c.proxy.ID), Metadata: &structpb.Struct{Fields: meta}}}
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, w := range c.watched {
		// As Istio: last_updated always, the zero time when nothing was sent.
		x := &statusv3.ClientConfig_GenericXdsConfig{TypeUrl: t, ConfigStatus: configStatus(w.status()), LastUpdated: timestamppb.New(w.sentAt)}
		if msg := w.errorMessage(); msg != "" {
			x.ErrorState = &adminv3.UpdateFailureState{LastUpdateAttempt: x.LastUpdated, Details: msg}
		}
		cc.GenericXdsConfigs = append(cc.GenericXdsConfigs, x)
	}
	slices.SortFunc(cc.GenericXdsConfigs, func(a, b *statusv3.ClientConfig_GenericXdsConfig) int {
		return strings.Compare(a.GetTypeUrl(), b.GetTypeUrl())
	})
	return cc
}

// proxyID is the third field of a node id (TYPE~IP~POD.NAMESPACE~DOMAIN),
// which Istio calls the proxy ID and names a proxy by in syncz: istioctl
// proxy-status prints it as NAME and matches `proxy-status POD.NAMESPACE`
// against it.
func proxyID(nodeID string) string {
	if parts := strings.Split(nodeID, "~"); len(parts) == 4 {
		return parts[2]
	}
	return nodeID
}

// statusRank orders states: the worse a stream's state of a type, the more
// it says about the proxy.
var statusRank = map[statusv3.ConfigStatus]int{statusv3.ConfigStatus_NOT_SENT: 1, statusv3.ConfigStatus_SYNCED: 2,
	statusv3.ConfigStatus_STALE: 3, statusv3.ConfigStatus_ERROR: 4}

// mergeClientConfig folds another stream of the same proxy into dst: types
// only it has join, and for a type both have the worse state wins.
func mergeClientConfig(dst, src *statusv3.ClientConfig) {
	for _, x := range src.GetGenericXdsConfigs() {
		i := slices.IndexFunc(dst.GenericXdsConfigs, func(y *statusv3.ClientConfig_GenericXdsConfig) bool { return y.GetTypeUrl() == x.GetTypeUrl() })
		switch {
		case i < 0:
			dst.GenericXdsConfigs = append(dst.GenericXdsConfigs, x)
		case statusRank[x.GetConfigStatus()] > statusRank[dst.GenericXdsConfigs[i].GetConfigStatus()]:
			dst.GenericXdsConfigs[i] = x
		}
	}
	slices.SortFunc(dst.GenericXdsConfigs, func(a, b *statusv3.ClientConfig_GenericXdsConfig) int {
		return strings.Compare(a.GetTypeUrl(), b.GetTypeUrl())
	})
}

// configDump is what the connection's proxy should hold, in the shape of
// Envoy's /config_dump (bootstrap, clusters, listeners, scoped routes,
// routes, secrets, extension configs), as Istio's istiod answers
// config_dump for istioctl proxy-status POD to compare with the proxy's
// own. Types the proxy does not watch are left empty, and so is a type
// that does not generate.
func (c *Connection) configDump() ([]*anypb.Any, error) {
	pc := c.server.PushContext()
	if pc == nil {
		return nil, nil
	}
	held := map[string][]*gen.Resource{}
	for _, t := range []string{gen.ClusterType, gen.ListenerType, gen.RouteType} {
		c.mu.Lock()
		w := c.watched[t]
		var names []string
		if w != nil && !w.wildcard {
			names = w.names
		}
		c.mu.Unlock()
		if w == nil || (names == nil && !w.wildcard) {
			continue
		}
		rs, err := c.server.generate(pc, c.proxy, t, names)
		if err != nil {
			c.server.log.Info("config_dump: type left out", "proxy", c.proxy.ID, "type", typeLabel(t), "err", err)
			continue
		}
		held[t] = rs
	}
	v := pc.Version
	clusters := &adminv3.ClustersConfigDump{VersionInfo: v}
	for _, r := range held[gen.ClusterType] {
		clusters.DynamicActiveClusters = append(clusters.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{Cluster: r.Any})
	}
	listeners := &adminv3.ListenersConfigDump{VersionInfo: v}
	for _, r := range held[gen.ListenerType] {
		listeners.DynamicListeners = append(listeners.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{
			Name: r.Name, ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{Listener: r.Any, VersionInfo: v}})
	}
	routes := &adminv3.RoutesConfigDump{}
	for _, r := range held[gen.RouteType] {
		routes.DynamicRouteConfigs = append(routes.DynamicRouteConfigs, &adminv3.RoutesConfigDump_DynamicRouteConfig{RouteConfig: r.Any, VersionInfo: v})
	}
	var out []*anypb.Any
	for _, m := range []proto.Message{&adminv3.BootstrapConfigDump{}, clusters, listeners, &adminv3.ScopedRoutesConfigDump{},
		routes, &adminv3.SecretsConfigDump{}, &adminv3.EcdsConfigDump{}} {
		a, err := anypb.New(m)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
