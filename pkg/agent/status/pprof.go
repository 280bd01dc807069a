package status

import (
	"net"
	"net/http"
	"net/http/pprof"
)

// mountProfiling serves Go's profiles under /debug/pprof/ (the index and
// the named profiles such as heap and goroutine, plus cmdline, profile,
// symbol and trace), as Istio's agent does with --profiling (on by
// default): only to requests from loopback.
func mountProfiling(mux *http.ServeMux) {
	mux.Handle("/debug/pprof/", localOnly(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", localOnly(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", localOnly(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", localOnly(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", localOnly(http.HandlerFunc(pprof.Trace)))
}

// localOnly refuses requests whose peer is not a loopback address.
func localOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(r) {
			http.Error(w, "only from localhost", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func fromLoopback(r *http.Request) bool {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
