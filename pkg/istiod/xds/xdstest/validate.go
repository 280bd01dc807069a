package xdstest

import (
	"errors"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/skiff-mesh/skiff/pkg/nds"
)

// Refs are the names one set of resources refers to or defines.
type Refs struct {
	// Clusters referenced by routes and TCP proxies.
	Clusters map[string]bool
	// Routes (RDS names) referenced by connection managers.
	Routes map[string]bool
	// EDS names referenced by EDS clusters.
	EDS map[string]bool
}

func newRefs() *Refs {
	return &Refs{Clusters: map[string]bool{}, Routes: map[string]bool{}, EDS: map[string]bool{}}
}

// Validate unpacks an Any, runs ValidateAll on it and, recursively, on every
// Any inside it, and records the names it references into refs (may be nil).
// It returns the unpacked resource: a proto.Message, or for a NameTable
// (plain Go, not a registered protobuf type) a *nds.NameTable, which is
// valid when it decodes.
func Validate(a *anypb.Any, refs *Refs) (any, error) {
	if a.GetTypeUrl() == nds.TypeURL {
		nt := &nds.NameTable{}
		if err := nt.Unmarshal(a.GetValue()); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", a.GetTypeUrl(), err)
		}
		return nt, nil
	}
	m, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{})
	if err != nil {
		return nil, fmt.Errorf("unpack %s: %w", a.GetTypeUrl(), err)
	}
	if refs == nil {
		refs = newRefs()
	}
	return m, walk(m.ProtoReflect(), refs, string(m.ProtoReflect().Descriptor().FullName()))
}

type validator interface{ ValidateAll() error }

// walk validates m when it is a top-level or Any-packed message and descends
// into every message field.
func walk(m protoreflect.Message, refs *Refs, path string) error {
	var errs []error
	if v, ok := m.Interface().(validator); ok && path != "" {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	record(m.Interface(), refs)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		fp := path + "." + string(fd.Name())
		visit := func(mv protoreflect.Message) {
			if a, ok := mv.Interface().(*anypb.Any); ok {
				inner, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{})
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: unpack %s: %w", fp, a.GetTypeUrl(), err))
					return
				}
				// Validated as a whole: a non-empty path makes walk validate it.
				if err := walk(inner.ProtoReflect(), refs, fp+"("+a.GetTypeUrl()+")"); err != nil {
					errs = append(errs, err)
				}
				return
			}
			if err := walk(mv, refs, ""); err != nil {
				errs = append(errs, err)
			}
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				visit(l.Get(i).Message())
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { visit(mv.Message()); return true })
			}
		default:
			visit(v.Message())
		}
		return true
	})
	return errors.Join(errs...)
}

// record notes the names m references.
func record(m proto.Message, refs *Refs) {
	switch v := m.(type) {
	case *routev3.RouteAction:
		if c := v.GetCluster(); c != "" {
			refs.Clusters[c] = true
		}
	case *routev3.WeightedCluster_ClusterWeight:
		refs.Clusters[v.GetName()] = true
	case *tcpv3.TcpProxy:
		if c := v.GetCluster(); c != "" {
			refs.Clusters[c] = true
		}
	case *hcmv3.HttpConnectionManager:
		if r := v.GetRds(); r != nil {
			refs.Routes[r.GetRouteConfigName()] = true
		}
	case *clusterv3.Cluster:
		if v.GetType() == clusterv3.Cluster_EDS {
			n := v.GetEdsClusterConfig().GetServiceName()
			if n == "" {
				n = v.GetName()
			}
			refs.EDS[n] = true
		}
	case *endpointv3.ClusterLoadAssignment:
	}
}

// Config is one proxy's resources by type URL, as Any.
type Config map[string][]*anypb.Any

// Check validates every resource of c and that every referenced cluster,
// route configuration and load assignment is in c. Names of types that are
// absent from c are not checked (a client may not have asked for them).
func Check(c Config, clusterType, routeType, endpointType string) error {
	refs := newRefs()
	var errs []error
	names := map[string]map[string]bool{}
	for typ, rs := range c {
		names[typ] = map[string]bool{}
		for _, a := range rs {
			m, err := Validate(a, refs)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			names[typ][resourceName(m)] = true
		}
	}
	check := func(kind, typ string, want map[string]bool) {
		have, ok := names[typ]
		if !ok {
			return
		}
		for n := range want {
			if !have[n] {
				errs = append(errs, fmt.Errorf("%s %q is referenced but not generated", kind, n))
			}
		}
	}
	check("cluster", clusterType, refs.Clusters)
	check("route configuration", routeType, refs.Routes)
	check("load assignment", endpointType, refs.EDS)
	return errors.Join(errs...)
}

// resourceName returns the name of an xDS resource ("" for a NameTable).
func resourceName(m any) string {
	type named interface{ GetName() string }
	if n, ok := m.(named); ok {
		return n.GetName()
	}
	if c, ok := m.(*endpointv3.ClusterLoadAssignment); ok {
		return c.GetClusterName()
	}
	return ""
}

// Name returns the name of an xDS resource (cluster_name for load
// assignments, "" for a NameTable), as Validate returns it.
func Name(m any) string { return resourceName(m) }
