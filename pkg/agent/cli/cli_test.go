package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/version"
)

func run(args ...string) (int, string, string) {
	var out, errb strings.Builder
	code := Main(context.Background(), args, nil, &out, &errb, nil)
	return code, out.String(), errb.String()
}

func TestVersionAndUsage(t *testing.T) {
	if code, out, _ := run("version", "--short"); code != 0 || strings.TrimSpace(out) != "client version: "+version.Version {
		t.Errorf("version: %d %q", code, out)
	}
	if code, _, errs := run("frobnicate"); code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, errs)
	}
	if code, _, _ := run(); code != 2 {
		t.Errorf("no command: %d", code)
	}
}

func TestRequest(t *testing.T) {
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}))
	defer admin.Close()
	port := admin.Listener.Addr().String()[strings.LastIndex(admin.Listener.Addr().String(), ":")+1:]
	code, out, errs := run("request", "--debug-port", port, "post", "drain_listeners")
	if code != 0 || out != "POST /drain_listeners" {
		t.Errorf("request: %d %q %q", code, out, errs)
	}
}

func TestWait(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Swap(true) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if code, _, errs := run("wait", "--url", srv.URL, "--periodMillis", "10", "--timeoutSeconds", "5", "--requestTimeoutMillis", "200"); code != 0 {
		t.Errorf("wait: %d %s", code, errs)
	}
	if code, _, errs := run("wait", "--url", srv.URL, "--requestTimeoutMillis=0"); code != 2 || !strings.Contains(errs, "--requestTimeoutMillis 0") {
		t.Errorf("wait with no time for an answer: %d %s, want 2 naming the flag", code, errs)
	}
	srv.Close()
	if code, _, _ := run("wait", "--url", srv.URL, "--periodMillis", "10", "--timeoutSeconds", "0"); code != 1 {
		t.Errorf("wait on a dead URL: %d, want 1", code)
	}
}

// TestUnappliedSettingsLogged: settings of Istio's agent that Skiff does not
// apply are named in the log at start, from the environment and from the
// mesh's proxyMetadata alike.
func TestUnappliedSettingsLogged(t *testing.T) {
	var out, errb strings.Builder
	env := []string{"WASM_PURGE_INTERVAL=1h", `PROXY_CONFIG={"proxyMetadata": {"PROXY_CONFIG_XDS_AGENT": "true", "SECRET_TTL": "12h"}}`}
	code := Main(context.Background(), []string{"proxy", "sidecar"}, env, &out, &errb, nil)
	line := ""
	for l := range strings.Lines(errb.String()) {
		if strings.Contains(l, "do not apply to Skiff") {
			line = l
		}
	}
	if code != 1 || !strings.Contains(line, "PROXY_CONFIG_XDS_AGENT") || !strings.Contains(line, "WASM_PURGE_INTERVAL") || strings.Contains(line, "SECRET_TTL") {
		t.Errorf("exit %d; the settings logged: %q; stderr %q", code, line, errb.String())
	}
}

// TestIstioProxyArguments runs "proxy" with the arguments Istio's sidecar
// template passes: every flag is accepted and the ones without effect are
// logged (--domain is applied: the DNS proxy's cluster domain); what stops
// the agent here is the missing root certificate.
func TestIstioProxyArguments(t *testing.T) {
	code, _, errs := run("proxy", "sidecar", "--domain", "default.svc.cluster.local",
		"--proxyLogLevel=warning", "--proxyComponentLogLevel=misc:error", "--log_output_level=default:info",
		"--stsPort=15463", "--log_as_json", "--concurrency", "2")
	if code != 1 || strings.Contains(errs, "unknown flag") || strings.Contains(errs, "--domain=") || !strings.Contains(errs, "--stsPort=15463") ||
		!strings.Contains(errs, "root-cert.pem") {
		t.Errorf("Istio's proxy arguments: exit %d, stderr %q", code, errs)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"proxy", "--no-such-flag"}},
		{[]string{"proxy", "--log_output_level=default:loud"}},
		{[]string{"wait", "--timeoutSeconds=soon"}},
		{[]string{"request", "--debug-port=x", "GET", "stats"}},
	} {
		code, _, errs := run(tc.args...)
		if code != 2 || !strings.Contains(errs, "pilot-agent "+tc.args[0]+": ") || len(strings.TrimSpace(errs)) < 20 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the reason", tc.args, code, errs)
		}
	}
}
