package status

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// TestProfiling fetches profiles over loopback from a real HTTP server,
// and checks they are refused to other peers and absent without Profiling.
func TestProfiling(t *testing.T) {
	on := New(Options{Profiling: true}, slog.New(slog.DiscardHandler)).Handler()
	srv := httptest.NewServer(on)
	defer srv.Close()
	for _, c := range []struct{ path, want string }{
		{"/debug/pprof/", "heap"},
		{"/debug/pprof/heap?debug=1", "heap profile:"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile:"},
		{"/debug/pprof/cmdline", "status.test"},
	} {
		resp, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), c.want) {
			t.Errorf("GET %s = %s, want 200 with %q; body starts %.200q", c.path, resp.Status, c.want, b)
		}
	}
	// The binary heap profile is gzipped protobuf.
	resp, err := http.Get(srv.URL + "/debug/pprof/heap")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("heap profile is not gzip: starts %.20q", b)
	}

	// The CPU profile is gzipped protobuf; the trace starts with its header.
	for path, magic := range map[string]string{"/debug/pprof/profile?seconds=0.05": "\x1f\x8b", "/debug/pprof/trace?seconds=0.05": "go 1."} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), magic) {
			t.Errorf("GET %s = %s, starts %.20q; want %q", path, resp.Status, b, magic)
		}
	}
	// Symbols for pprof: the address of a function gives its name.
	pc := reflect.ValueOf(TestProfiling).Pointer()
	resp, err = http.Post(srv.URL+"/debug/pprof/symbol", "text/plain", strings.NewReader(fmt.Sprintf("%#x+0x1", pc)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%#x github.com/skiff-mesh/skiff/pkg/agent/status.TestProfiling\n", pc); !strings.Contains(string(b), want) || !strings.HasPrefix(string(b), "num_symbols: 1\n") {
		t.Errorf("symbol lookup = %q, want a line %q", b, want)
	}
	for _, path := range []string{"/debug/pprof/nosuch", "/debug/pprof/heap?seconds=5", "/debug/pprof/profile?seconds=x"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 4 {
			t.Errorf("GET %s = %s, want a 4xx", path, resp.Status)
		}
	}

	// httptest.NewRequest's peer is 192.0.2.1: not loopback.
	if code, _ := get(t, on, "/debug/pprof/heap"); code != http.StatusForbidden {
		t.Errorf("heap profile to a remote peer = %d, want 403", code)
	}
	off := New(Options{}, slog.New(slog.DiscardHandler)).Handler()
	req := httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil)
	req.RemoteAddr = "127.0.0.1:5000"
	rec := httptest.NewRecorder()
	off.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Errorf("heap profile without Profiling = %d, want 404", rec.Code)
	}
}
