package inject

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
)

// scrapeTargetsAnnotation lists an app's metrics endpoints for the agent
// to merge: PORT[:PATH] entries, comma-separated (PATH defaults to
// /metrics).
const scrapeTargetsAnnotation = "prometheus.istio.io/scrape-targets"

// reservedPorts are the data plane's own ports, never an app's metrics.
var reservedPorts = map[string]string{
	"15000": "Envoy admin", "15001": "outbound capture", "15004": "pilot debug",
	"15006": "inbound capture", "15008": "HBONE", "15020": "agent status and merged metrics",
	"15021": "Envoy health", "15053": "DNS proxy", "15090": "Envoy metrics, merged already",
}

// scrapeTarget is one app metrics endpoint, in the agent's JSON.
type scrapeTarget struct {
	Port string `json:"port"`
	Path string `json:"path"`
}

// scrapeConfig is ISTIO_PROMETHEUS_ANNOTATIONS: the app's own scrape
// settings, which the agent scrapes and merges with Envoy's.
type scrapeConfig struct {
	Scrape  string         `json:"scrape"`
	Path    string         `json:"path"`
	Port    string         `json:"port"`
	Targets []scrapeTarget `json:"targets,omitempty"`
}

func (c scrapeConfig) empty() bool {
	return c.Scrape == "" && c.Path == "" && c.Port == "" && len(c.Targets) == 0
}

// parseScrapeTargets reads scrapeTargetsAnnotation.
func parseScrapeTargets(v string) ([]scrapeTarget, error) {
	var out []scrapeTarget
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		port, path, _ := strings.Cut(e, ":")
		if port = strings.TrimSpace(port); port == "" {
			return nil, fmt.Errorf("entry %q has no port", e)
		}
		if path = strings.TrimSpace(path); path == "" {
			path = "/metrics"
		}
		out = append(out, scrapeTarget{Port: port, Path: path})
	}
	return out, nil
}

// checkScrapePort refuses a port that is not one, is the agent's, or is
// the data plane's.
func checkScrapePort(p, agent string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a port", p)
	}
	canon := strconv.Itoa(n)
	if canon == agent {
		return fmt.Errorf("port %s is the agent's own", p)
	}
	if why, ok := reservedPorts[canon]; ok {
		return fmt.Errorf("port %s is reserved for Istio (%s)", p, why)
	}
	return nil
}

// mergeMetrics points Prometheus at the agent's merged metrics, as
// Istio's injector does: unless the pod's prometheus.io/scrape is false,
// the mesh's enablePrometheusMerge or the pod's
// prometheus.istio.io/merge-metrics is false, or the pod is already aimed
// at the agent, the app's own scrape annotations (and scrape-targets, whose
// first entry also stands for the older port/path) move into the proxy's
// ISTIO_PROMETHEUS_ANNOTATIONS and the pod gets the agent's (the mesh's
// default status port, /stats/prometheus). A port that cannot be scraped
// is an error.
func (s *settings) mergeMetrics(pod *corev1.Pod) error {
	var cfg scrapeConfig
	var hasScrape, hasPort bool
	var targets string
	for k, v := range pod.Annotations {
		switch promKey(k) {
		case "prometheus_io_scrape":
			cfg.Scrape, hasScrape = v, true
		case "prometheus_io_path":
			cfg.Path = v
		case "prometheus_io_port":
			cfg.Port, hasPort = v, true
		case promKey(scrapeTargetsAnnotation):
			targets = v
		}
	}
	if on, err := strconv.ParseBool(cfg.Scrape); hasScrape && err == nil && !on {
		return nil
	}
	if m := s.mesh.GetEnablePrometheusMerge(); m != nil && !m.GetValue() {
		return nil
	}
	if v, ok := pod.Annotations[annotation.PrometheusMergeMetrics.Name]; ok {
		if on, err := strconv.ParseBool(v); err == nil && !on {
			return nil
		}
	}
	agent := strconv.Itoa(int(s.mesh.GetDefaultConfig().GetStatusPort()))
	if hasPort && cfg.Port == agent {
		return nil
	}
	if targets != "" {
		// Istio logs and ignores a malformed list.
		if ts, err := parseScrapeTargets(targets); err == nil {
			cfg.Targets = ts
		}
	}
	if len(cfg.Targets) > 0 {
		cfg.Port, cfg.Path = cfg.Targets[0].Port, cfg.Targets[0].Path
		for _, tg := range cfg.Targets {
			if err := checkScrapePort(tg.Port, agent); err != nil {
				return &AnnotationError{Annotation: scrapeTargetsAnnotation, Value: targets, Err: err}
			}
		}
	} else if cfg.Port != "" {
		if err := checkScrapePort(cfg.Port, agent); err != nil {
			return &AnnotationError{Annotation: "prometheus.io/port", Value: cfg.Port, Err: err}
		}
	}
	if c := sidecar(pod); c != nil && !cfg.empty() && !hasEnv(c, "ISTIO_PROMETHEUS_ANNOTATIONS") {
		js, err := json.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("encode ISTIO_PROMETHEUS_ANNOTATIONS: %w", err)
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: "ISTIO_PROMETHEUS_ANNOTATIONS", Value: string(js)})
	}
	for k := range pod.Annotations {
		switch promKey(k) {
		case "prometheus_io_scrape", "prometheus_io_path", "prometheus_io_port", promKey(scrapeTargetsAnnotation):
			delete(pod.Annotations, k)
		}
	}
	pod.Annotations["prometheus.io/port"] = agent
	pod.Annotations["prometheus.io/path"] = "/stats/prometheus"
	pod.Annotations["prometheus.io/scrape"] = "true"
	return nil
}
