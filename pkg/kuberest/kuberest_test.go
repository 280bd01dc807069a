package kuberest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// TestContentTypes: Kubernetes' own groups are asked for protobuf when
// protobuf is set and JSON otherwise; Istio's are asked for JSON always
// (the API server serves custom resources as JSON only).
func TestContentTypes(t *testing.T) {
	var mu sync.Mutex
	accept := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accept[r.URL.Path] = r.Header.Get("Accept")
		mu.Unlock()
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	get := func(c rest.Interface, resource string) {
		_ = c.Get().Resource(resource).Do(context.Background()).Error()
	}
	for _, protobuf := range []bool{true, false} {
		clients, err := New(&rest.Config{Host: srv.URL}, protobuf)
		if err != nil {
			t.Fatal(err)
		}
		core, err := NewCore(&rest.Config{Host: srv.URL}, protobuf)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			client   rest.Interface
			path     string
			protobuf bool
		}{
			{clients.Core, "/api/v1/pods", protobuf},
			{clients.Discovery, "/apis/discovery.k8s.io/v1/endpointslices", protobuf},
			{clients.Coordination, "/apis/coordination.k8s.io/v1/leases", protobuf},
			{clients.Networking, "/apis/networking.istio.io/v1/virtualservices", false},
			{clients.Security, "/apis/security.istio.io/v1/peerauthentications", false},
			{core, "/api/v1/events", protobuf},
		} {
			get(c.client, c.path[strings.LastIndex(c.path, "/")+1:])
			mu.Lock()
			got := accept[c.path]
			mu.Unlock()
			if strings.Contains(got, "protobuf") != c.protobuf {
				t.Errorf("protobuf=%v: GET %s asked for %q, want protobuf %v", protobuf, c.path, got, c.protobuf)
			}
		}
	}
}
