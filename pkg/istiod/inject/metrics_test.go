package inject

import (
	"errors"
	"testing"

	"istio.io/api/annotation"
)

// TestMergeMetrics: the app's scrape settings move into
// ISTIO_PROMETHEUS_ANNOTATIONS (scrape-targets' first entry standing for
// port and path), and a port the agent cannot scrape refuses the pod.
func TestMergeMetrics(t *testing.T) {
	in := newInjector(t, "", "")
	for _, tc := range []struct {
		name    string
		kv      []string
		env     string
		badAnno string
	}{
		{"none", nil, "", ""},
		{"app's own", []string{"prometheus.io/scrape", "true", "prometheus.io/port", "9000"}, `{"scrape":"true","path":"","port":"9000"}`, ""},
		{"targets", []string{scrapeTargetsAnnotation, "8080, 9100:/x"},
			`{"scrape":"","path":"/metrics","port":"8080","targets":[{"port":"8080","path":"/metrics"},{"port":"9100","path":"/x"}]}`, ""},
		{"reserved port", []string{"prometheus.io/port", "15090"}, "", "prometheus.io/port"},
		{"reserved target", []string{scrapeTargetsAnnotation, "8080,15000"}, "", scrapeTargetsAnnotation},
		{"not a port", []string{scrapeTargetsAnnotation, "http"}, "", scrapeTargetsAnnotation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := appPod()
			if tc.kv != nil {
				annotate(tc.kv...)(pod)
			}
			res, err := in.Inject(pod, "")
			if tc.badAnno != "" {
				var ae *AnnotationError
				if !errors.As(err, &ae) || ae.Annotation != tc.badAnno {
					t.Fatalf("Inject = %v, want an error about %s", err, tc.badAnno)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := res.Pod
			if p.Annotations["prometheus.io/port"] != "15020" || p.Annotations["prometheus.io/path"] != "/stats/prometheus" {
				t.Errorf("prometheus annotations %v, want the agent's", p.Annotations)
			}
			if _, ok := p.Annotations[scrapeTargetsAnnotation]; ok {
				t.Error("scrape-targets left on the pod")
			}
			got := ""
			for _, e := range sidecar(p).Env {
				if e.Name == "ISTIO_PROMETHEUS_ANNOTATIONS" {
					got = e.Value
				}
			}
			if got != tc.env {
				t.Errorf("ISTIO_PROMETHEUS_ANNOTATIONS %q, want %q", got, tc.env)
			}
		})
	}
	// Merging off: the app's annotations stay.
	pod := appPod()
	annotate(annotation.PrometheusMergeMetrics.Name, "false", "prometheus.io/port", "9000")(pod)
	res, err := in.Inject(pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Pod.Annotations["prometheus.io/port"]; got != "9000" {
		t.Errorf("merge-metrics false: prometheus.io/port %q, want 9000 kept", got)
	}
}
