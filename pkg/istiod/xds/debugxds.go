package xds

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/skiff-mesh/skiff/pkg/istiod/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Debug type URLs: Istio's istioctl asks for them on an ADS stream of its
// own (proxy-status asks for syncz, proxy-status POD for config_dump).
const (
	DebugSyncz      = "istio.io/debug/syncz"
	DebugConfigDump = "istio.io/debug/config_dump"
	debugPrefix     = "istio.io/debug"
)

// isDebugType reports whether a type URL is one of Istio's debug types.
func isDebugType(typeURL string) bool { return strings.HasPrefix(typeURL, debugPrefix) }

// Identity is who a stream proved to be (a workload certificate or a
// service-account token on the TLS port).
type Identity struct {
	Namespace, ServiceAccount string
}

// ControlPlane names this istiod in syncz responses, as Istio's istiod does
// in DiscoveryResponse.control_plane: istioctl proxy-status prints ID in
// its ISTIOD column.
type ControlPlane struct {
	// ID is the instance, Istio's POD_NAME.
	ID string
	// Version and Revision describe the build.
	Version, Revision string
}

// cpInstance is the JSON of control_plane.identifier, as Istio's
// IstioControlPlaneInstance with its BuildInfo.
type cpInstance struct {
	Component string
	ID        string
	Info      cpBuildInfo
}

type cpBuildInfo struct {
	Version       string `json:"version"`
	GitRevision   string `json:"revision"`
	GolangVersion string `json:"golang_version"`
	BuildStatus   string `json:"status"`
	GitTag        string `json:"tag"`
}

func (cp ControlPlane) core() *corev3.ControlPlane {
	b, _ := json.Marshal(cpInstance{Component: "istiod", ID: cp.ID, Info: cpBuildInfo{
		Version: cp.Version, GitRevision: cp.Revision, GolangVersion: runtime.Version(), BuildStatus: "Clean", GitTag: cp.Version,
	}}) // plain strings: cannot fail
	return &corev3.ControlPlane{Identifier: string(b)}
}

// answerDebug answers a debug request of a SotW stream. sent holds the
// types answered on the stream: the first request of a type is answered
// whatever its nonce (Istio's adsc sends one it made up), later ones only
// without a nonce (the acknowledgement of a debug response gets nothing). A
// caller that may not have the answer ends the stream with the status Istio
// gives (Unauthenticated, PermissionDenied).
func (s *Server) answerDebug(stream sotwStream, node *debugNode, req *discoveryv3.DiscoveryRequest, names []string, sent map[string]bool) error {
	if sent[req.GetTypeUrl()] && req.GetResponseNonce() != "" {
		return nil
	}
	callerNS, err := s.debugCaller(stream.Context(), node)
	if err != nil {
		return err
	}
	resp, err := s.debugResponse(req.GetTypeUrl(), names, callerNS)
	if err != nil {
		return err
	}
	sent[req.GetTypeUrl()] = true
	return stream.SendMsg(resp)
}

// answerDebugDelta is answerDebug for a delta stream: the same answer, each
// resource named (syncz: by proxy ID; istio.io/debug: by the request) in a
// DeltaDiscoveryResponse.
func (s *Server) answerDebugDelta(stream deltaStream, node *debugNode, req *discoveryv3.DeltaDiscoveryRequest, sent map[string]bool) error {
	if sent[req.GetTypeUrl()] && req.GetResponseNonce() != "" {
		return nil
	}
	callerNS, err := s.debugCaller(stream.Context(), node)
	if err != nil {
		return err
	}
	names := slices.DeleteFunc(slices.Clone(req.GetResourceNamesSubscribe()), func(n string) bool { return n == "*" })
	r, err := s.debugResponse(req.GetTypeUrl(), names, callerNS)
	if err != nil {
		return err
	}
	resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: r.GetTypeUrl(), SystemVersionInfo: r.GetVersionInfo(), Nonce: r.GetNonce(),
		ControlPlane: r.GetControlPlane()}
	for i, a := range r.GetResources() {
		name := strconv.Itoa(i)
		var cc statusv3.ClientConfig
		if r.GetTypeUrl() == DebugGeneric && len(names) == 1 {
			name = names[0]
		} else if a.MessageIs(&cc) && a.UnmarshalTo(&cc) == nil {
			name = cc.GetNode().GetId()
		}
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: name, Version: r.GetVersionInfo(), Resource: a})
	}
	sent[req.GetTypeUrl()] = true
	return stream.SendMsg(resp)
}

// debugNode is what a stream keeps of its first node for its debug
// requests: the id, and the namespace and service account its metadata
// claims. Not the node itself: an Istio agent's carries tens of metadata
// fields, which would stay with every proxy's stream.
type debugNode struct{ id, ns, sa string }

func debugNodeOf(n *corev3.Node) *debugNode {
	f := n.GetMetadata().GetFields()
	return &debugNode{id: n.GetId(), ns: f["NAMESPACE"].GetStringValue(), sa: f["SERVICE_ACCOUNT"].GetStringValue()}
}

// debugCaller checks who may read debug state, as Istio 1.31 does with
// ENABLE_DEBUG_ENDPOINT_AUTH on (its default): only an authenticated
// stream (so never the plaintext port), whose node metadata NAMESPACE and
// SERVICE_ACCOUNT, when given, match the identity. It returns the
// namespace the caller is limited to: "" for the system namespace (or with
// the check off), which sees every proxy.
func (s *Server) debugCaller(ctx context.Context, n *debugNode) (string, error) {
	var node debugNode
	if n != nil {
		node = *n
	}
	var id Identity
	ok := false
	if s.identity != nil {
		id, ok = s.identity(ctx)
	}
	if !ok {
		if s.debugAuthOff {
			return "", nil
		}
		s.log.Warn("debug request refused: not authenticated; use the TLS port with a token or certificate", "node", node.id)
		return "", status.Error(codes.Unauthenticated, "authentication required")
	}
	if err := s.matchIdentity("debug request", node.id, id, node.ns, node.sa); err != nil {
		return "", err
	}
	if s.debugAuthOff || id.Namespace == s.systemNamespace {
		return "", nil
	}
	return id.Namespace, nil
}

// debugResponse builds the answer to a debug type, for a caller limited to
// callerNS ("" for all).
func (s *Server) debugResponse(typeURL string, names []string, callerNS string) (*discoveryv3.DiscoveryResponse, error) {
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, Nonce: fmt.Sprintf("debug-%d", s.nextID.Add(1))}
	if pc := s.PushContext(); pc != nil {
		resp.VersionInfo = pc.Version
	}
	switch typeURL {
	case DebugSyncz:
		resp.ControlPlane = s.controlPlane.core()
		// One entry per proxy: an agent's own NameTable stream (beside a
		// proxyless app's) carries the node of its app's.
		var order []string
		byID := map[string]*statusv3.ClientConfig{}
		for _, c := range s.Connections() {
			if callerNS != "" && c.proxy.Namespace != callerNS {
				continue
			}
			cc := c.clientConfig()
			if prev := byID[c.proxy.ID]; prev != nil {
				mergeClientConfig(prev, cc)
				continue
			}
			byID[c.proxy.ID] = cc
			order = append(order, c.proxy.ID)
		}
		for _, id := range order {
			a, err := anypb.New(byID[id])
			if err != nil {
				return nil, status.Errorf(codes.Internal, "syncz of %s: %v", id, err)
			}
			resp.Resources = append(resp.Resources, a)
		}
	case DebugConfigDump:
		// As Istio: a missing or hidden proxy, or more or fewer than one
		// name, is an empty answer, not an error.
		if len(names) != 1 {
			s.log.Info("config_dump wants one proxy", "names", len(names))
			break
		}
		c := s.connectionLike(names[0])
		if c == nil || (callerNS != "" && c.proxy.Namespace != callerNS) {
			s.log.Info("config_dump: no connection for the proxy", "proxy", names[0])
			break
		}
		dump, err := c.configDump()
		if err != nil {
			s.log.Info("config_dump failed", "proxy", c.proxy.ID, "err", err)
			break
		}
		resp.Resources = dump
	case DebugGeneric:
		if err := s.genericDebug(resp, names, callerNS); err != nil {
			return nil, err
		}
	default:
		return nil, status.Errorf(codes.Unimplemented, "debug type %q is not served (only %s, %s and %s)", typeURL, DebugGeneric, DebugSyncz, DebugConfigDump)
	}
	return resp, nil
}

// connectionLike returns the first connection (by id) whose id contains
// name, as Istio finds the proxy of config_dump ("POD.NAMESPACE").
func (s *Server) connectionLike(name string) *Connection {
	conns := s.Connections()
	if i := slices.IndexFunc(conns, func(c *Connection) bool { return strings.Contains(c.id, name) }); i >= 0 {
		return conns[i]
	}
	return nil
}

// matchIdentity refuses a node whose namespace or service account, when
// given, is not the identity's, as Istio's authorization does.
func (s *Server) matchIdentity(what, node string, id Identity, ns, sa string) error {
	if (ns == "" || ns == id.Namespace) && (sa == "" || sa == id.ServiceAccount) {
		return nil
	}
	s.log.Warn(what+" refused: identity does not match the node", "node", node,
		"identity", id.Namespace+"/"+id.ServiceAccount, "namespace", ns, "serviceAccount", sa)
	return status.Errorf(codes.PermissionDenied, "authorization failed: identity %s/%s does not match node %s/%s",
		id.Namespace, id.ServiceAccount, ns, sa)
}

// checkNode refuses a proxy stream whose node claims another namespace or
// service account than the identity the stream proved, as Istio does
// (PILOT_ENABLE_XDS_IDENTITY_CHECK): a workload's certificate gets it only
// its own namespace's configuration. Streams that proved nothing (the
// plaintext port) are not checked, as in Istio.
func (s *Server) checkNode(ctx context.Context, p *model.Proxy, meta *structpb.Struct) error {
	if s.identityOff || s.identity == nil {
		return nil
	}
	id, ok := s.identity(ctx)
	if !ok {
		return nil
	}
	return s.matchIdentity("xDS stream", p.ID, id, p.Namespace, meta.GetFields()["SERVICE_ACCOUNT"].GetStringValue())
}
