package istiod_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// TestAnalysisServed: istiod analyzes the mesh on every full push and
// lists the messages under /debug/analyze, and a fixed problem goes away.
func TestAnalysisServed(t *testing.T) {
	dir := meshDir(t)
	bad := filepath.Join(dir, "typo.yaml")
	writeFile(t, bad, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: typo, namespace: default}
spec:
  hosts: [reviews-typo]
  http:
  - route: [{destination: {host: reviewz}}]
`)
	d := startIstiod(t, istiod.Config{ConfigDir: dir})
	url := "http://" + d.Addr("debug") + "/debug/analyze?namespace=default"
	analyzed := func() string { _, body := get(t, url); return body }
	polltest.Within(t, 20*time.Second, "IST0101 for the missing host", func() bool {
		body := analyzed()
		return strings.Contains(body, "IST0101") && strings.Contains(body, "reviewz")
	})
	writeFile(t, bad, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: typo, namespace: default}
spec:
  hosts: [reviews-typo]
  http:
  - route: [{destination: {host: reviews}}]
`)
	polltest.Within(t, 20*time.Second, "the message gone once the host exists", func() bool {
		return !strings.Contains(analyzed(), "reviewz")
	})
}
