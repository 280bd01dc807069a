package xds

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// DebugGeneric is Istio's generic debug type: `istioctl x internal-debug`
// names an HTTP debug path as the one resource ("syncz",
// "config_dump?proxyID=ID") and gets that endpoint's body back as the
// value of one resource of this type.
const DebugGeneric = "istio.io/debug"

// namespaceDebugPaths are the debug paths a caller outside the system
// namespace may read through DebugGeneric (Istio allows config_dump, ndsz
// and edsz; Skiff's istiod has only config_dump of these).
var namespaceDebugPaths = map[string]bool{"config_dump": true, "ndsz": true, "edsz": true}

// debugHTTP holds the handler of istiod's HTTP debug endpoints, which
// DebugGeneric answers from.
type debugHTTP struct{ h atomic.Pointer[http.Handler] }

// SetDebugHandler sets the handler DebugGeneric requests are served by:
// istiod's debug mux (/debug/syncz, /debug/configz, ...). Until it is set,
// DebugGeneric requests end the stream with Unavailable.
func (s *Server) SetDebugHandler(h http.Handler) { s.debugHTTP.h.Store(&h) }

// CallerNamespaceKey is the request context key under which DebugGeneric
// passes the namespace the caller is limited to ("" for all) to the debug
// handler.
type CallerNamespaceKey struct{}

// genericDebug answers DebugGeneric for a caller limited to callerNS: the
// body of GET /debug/NAME from the debug handler, whatever its status (as
// Istio's istiod, which keeps only the body).
func (s *Server) genericDebug(resp *discoveryv3.DiscoveryResponse, names []string, callerNS string) error {
	if len(names) != 1 {
		return status.Error(codes.InvalidArgument, "exactly one debug request is required")
	}
	name := names[0]
	u, err := url.Parse(name)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "debug request %q: %v", name, err)
	}
	if callerNS != "" && !namespaceDebugPaths[u.Path] {
		return status.Errorf(codes.PermissionDenied, "debug %q is not available to namespace %s: only config_dump", u.Path, callerNS)
	}
	hp := s.debugHTTP.h.Load()
	if hp == nil {
		return status.Errorf(codes.Unavailable, "debug %q: istiod serves no debug endpoints", name)
	}
	body := s.debugBody(*hp, name, u, callerNS)
	resp.Resources = []*anypb.Any{{TypeUrl: DebugGeneric, Value: body}}
	return nil
}

// debugBody runs GET /debug/NAME on h. A caller limited to a namespace
// asking for another namespace's proxy gets the answer for a proxy that is
// not connected.
func (s *Server) debugBody(h http.Handler, name string, u *url.URL, callerNS string) []byte {
	if callerNS != "" && u.Path == "config_dump" {
		id := u.Query().Get("proxyID")
		for _, c := range s.Connections() {
			if c.proxy.ID == id && c.proxy.Namespace != callerNS {
				s.log.Info("debug config_dump: proxy of another namespace hidden", "proxy", id, "caller", callerNS)
				return fmt.Appendf(nil, "proxy %q is not connected\n", id)
			}
		}
	}
	ctx := context.WithValue(context.Background(), CallerNamespaceKey{}, callerNS)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/debug/"+name, nil)
	if err != nil {
		return fmt.Appendf(nil, "debug request %q: %v\n", name, err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		s.log.Info("debug request answered with an error", "path", name, "status", rec.Code)
	}
	return rec.Body.Bytes()
}
