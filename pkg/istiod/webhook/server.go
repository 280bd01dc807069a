package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"time"

	"github.com/skiff-mesh/skiff/pkg/httpserver"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/skiff-mesh/skiff/pkg/istiod/inject"
	"github.com/skiff-mesh/skiff/pkg/istiod/validation"
)

// Paths the webhooks are served on, as in Istio.
const (
	InjectPath   = "/inject"
	ValidatePath = "/validate"
	ReadyPath    = "/ready"
)

// DefaultMaxRequestBytes bounds an AdmissionReview body (the API server's
// own request limit is 3 MiB; a review carries the object and, on update,
// its old version).
const DefaultMaxRequestBytes = 8 << 20

// Options configures a Server.
type Options struct {
	// Injector serves /inject; nil leaves /inject unserved (404).
	Injector *inject.Injector
	// Validator serves /validate; nil leaves /validate unserved (404).
	Validator *validation.Validator
	// Log receives one line per injection or refusal; nil discards.
	Log *slog.Logger
	// MaxRequestBytes bounds request bodies (DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// Analyze, when set, is asked about every object /validate admits:
	// its warnings go into the answer (kubectl prints them), and a
	// non-empty refusal turns the answer into a denial with that message.
	Analyze func(req *admissionv1.AdmissionRequest) (warnings []string, refusal string)
}

// Server is istiod's admission webhook server.
type Server struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
}

// New returns a Server for opts.
func New(opts Options) *Server {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	s := &Server{opts: opts, log: opts.Log.With("component", "webhook"), mux: http.NewServeMux()}
	if opts.Injector != nil {
		h := s.review(s.injectPod)
		s.mux.Handle(InjectPath, h)
		// Istio's injection URLs may carry parameters in the path (/inject/cluster/X/net/Y).
		s.mux.Handle(InjectPath+"/", h)
	}
	if opts.Validator != nil {
		s.mux.Handle(ValidatePath, s.review(s.validate))
	}
	s.mux.HandleFunc(ReadyPath, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return s
}

// Handler returns the webhooks' HTTP handler: /inject, /validate, /ready.
func (s *Server) Handler() http.Handler { return s.mux }

// Review answers an AdmissionReview body for path (InjectPath or
// ValidatePath) without HTTP: the status code and the response body. It is
// what the handler runs, exposed for tests and fuzzing.
func (s *Server) Review(path string, body []byte) (int, []byte) {
	var fn func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
	switch {
	case path == ValidatePath && s.opts.Validator != nil:
		fn = s.validate
	case path == InjectPath && s.opts.Injector != nil:
		fn = s.injectPod
	default:
		return http.StatusNotFound, []byte("no webhook at " + path + "\n")
	}
	return s.answer(fn, body)
}

func (s *Server) answer(fn func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse, body []byte) (code int, out []byte) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("webhook panic", "panic", p)
			code, out = http.StatusInternalServerError, []byte("internal error\n")
		}
	}()
	rev, err := ParseReview(body)
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			return re.Status, []byte(re.Error() + "\n")
		}
		return http.StatusBadRequest, []byte(err.Error() + "\n")
	}
	resp := fn(rev.Request)
	resp.UID = rev.Request.UID
	answer := admissionv1.AdmissionReview{TypeMeta: rev.TypeMeta, Response: resp}
	b, err := json.Marshal(&answer)
	if err != nil {
		return http.StatusInternalServerError, []byte("encode response: " + err.Error() + "\n")
	}
	return http.StatusOK, b
}

func (s *Server) review(fn func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body over %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
			return
		}
		code, out := s.answer(fn, body)
		if code == http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
		} else {
			s.log.Warn("bad webhook request", "path", r.URL.Path, "status", code, "reason", string(out))
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		w.WriteHeader(code)
		_, _ = w.Write(out)
	})
}

// Serve serves the webhooks with TLS on l until ctx ends, then shuts down
// gracefully (5 s at most). tlsConfig must provide a certificate (istiod
// passes ca.CA.ServerTLSConfig()).
func (s *Server) Serve(ctx context.Context, l net.Listener, tlsConfig *tls.Config) error {
	if tlsConfig == nil || (tlsConfig.GetCertificate == nil && len(tlsConfig.Certificates) == 0 && tlsConfig.GetConfigForClient == nil) {
		return errors.New("webhook server: a TLS certificate is required")
	}
	srv := &http.Server{
		Handler:           s.mux,
		TLSConfig:         tlsConfig.Clone(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if err := httpserver.Serve(ctx, srv, l, 5*time.Second); err != nil {
		return fmt.Errorf("webhook server: %w", err)
	}
	return nil
}

// ListenAndServe listens on addr (":15017") and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("webhook server: %w", err)
	}
	s.log.Info("serving webhooks", "addr", l.Addr().String())
	return s.Serve(ctx, l, tlsConfig)
}
