package debug_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/istiod/analysis"
	"github.com/skiff-mesh/skiff/pkg/istiod/debug"
)

func TestAnalyzeEndpoint(t *testing.T) {
	s := &analysis.Set{}
	if errs := s.AddYAML("in.yaml", []byte(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec: {hosts: [reviews], http: [{route: [{destination: {host: ratings}}]}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: gone, namespace: other}
spec: {host: gone}
`), "default"); len(errs) > 0 {
		t.Fatal(errs)
	}
	r := analysis.NewReporter(nil)
	r.Report(analysis.AnalyzeSet(s))
	srv := httptest.NewServer(debug.Analyze(r.Messages))
	defer srv.Close()
	for _, tc := range []struct {
		query string
		codes []string
	}{
		{"", []string{"IST0174", "IST0101"}},
		{"?namespace=shop", []string{"IST0101"}},
		{"?level=error", []string{"IST0101"}},
	} {
		resp, err := http.Get(srv.URL + debug.AnalyzePath + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Count    int `json:"count"`
			Messages []struct {
				Code, Origin, Field string
			} `json:"messages"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var codes []string
		for _, m := range body.Messages {
			codes = append(codes, m.Code)
		}
		if body.Count != len(tc.codes) || len(codes) != len(tc.codes) || (len(codes) > 0 && codes[0] != tc.codes[0]) {
			t.Errorf("%q: codes %v (count %d), want %v", tc.query, codes, body.Count, tc.codes)
		}
	}
	resp, err := http.Get(srv.URL + debug.AnalyzePath + "?level=fatal")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad level: status %d", resp.StatusCode)
	}
}
