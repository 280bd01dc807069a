package inject_test

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/skiff-mesh/skiff/pkg/istiod/inject/istiochart"
)

// known is how Skiff's injection of a case of Istio's test data differs
// from Istio's expected output, and why.
type known struct {
	paths  []string
	reason string
	// err is a substring of the error injection fails with instead.
	err string
}

// knownDifferences lists, by expected output file, every case whose
// injection differs from Istio's. A case not listed must match exactly;
// a listed path that no longer differs fails the test too, so the table
// says what is true.
var knownDifferences = map[string]known{
	// Skiff's pilot-agent learns a status port other than 15020 only from
	// PROXY_CONFIG; Istio's also reads the pod's status.sidecar.istio.io/port
	// from the downward API's annotations file, so Istio leaves it out.
	"status_params.yaml.injected":              statusPortInProxyConfig,
	"kubevirtInterfaces.yaml.injected":         statusPortInProxyConfig,
	"reroute-virtual-interfaces.yaml.injected": statusPortInProxyConfig,
	"status_annotations.yaml.injected":         statusPortInProxyConfig,
	// Skiff's pilot-agent does not serve Istio's /app-lifecycle/ endpoints
	// (prestopz, poststartz), so lifecycle hooks are not sent through it.
	"hello-probes.yaml.injected":                       lifecycleHooks,
	"hello-probes.proxyHoldsApplication.yaml.injected": lifecycleHooks,
	// Istio's kube-inject writes a CronJob's injected pod metadata on
	// spec.jobTemplate.metadata, not on the pod template (Istio's webhook
	// test skips CronJob for this); Skiff's pod has it where it belongs.
	"cronjob.yaml.injected":             cronJobMetadata,
	"cronjob-old-version.yaml.injected": cronJobMetadata,
	// A pod that already has sidecar.istio.io/status: Skiff leaves it alone
	// (policy.go); Istio injects it again, replacing the containers and
	// volumes the status names and merging the old ISTIO_KUBE_APP_PROBERS.
	"merge-probers.yaml.injected": {reason: "re-injection", paths: []string{
		"metadata.annotations[istio.io/rev]", "spec.containers[istio-proxy]",
		"spec.containers[new].livenessProbe.httpGet.path", "spec.containers[new].livenessProbe.httpGet.port",
		"spec.initContainers[istio-proxy]", "spec.volumes[istio-ca-crl]",
	}},
}

var (
	statusPortInProxyConfig = known{reason: "status port in PROXY_CONFIG", paths: []string{
		"spec.initContainers[istio-proxy].env[PROXY_CONFIG].value",
	}}
	lifecycleHooks = known{reason: "no /app-lifecycle/ in Skiff's agent", paths: []string{
		"spec.containers[hello].lifecycle.postStart.httpGet", "spec.containers[hello].lifecycle.postStart.tcpSocket",
		"spec.containers[hello].lifecycle.preStop.httpGet.path", "spec.containers[hello].lifecycle.preStop.httpGet.port",
		"spec.initContainers[istio-proxy].env[ISTIO_KUBE_APP_PROBERS].value",
	}}
	cronJobMetadata = known{reason: "Istio's kube-inject CronJob quirk", paths: []string{"metadata.annotations", "metadata.labels"}}
)

// errorNames are the annotations Skiff's errors name for the settings
// Istio's errors name.
var errorNames = map[string]string{
	"includeipranges":      "traffic.sidecar.istio.io/includeoutboundipranges",
	"excludeipranges":      "traffic.sidecar.istio.io/excludeoutboundipranges",
	"includeinboundports":  "traffic.sidecar.istio.io/includeinboundports",
	"excludeinboundports":  "traffic.sidecar.istio.io/excludeinboundports",
	"excludeoutboundports": "traffic.sidecar.istio.io/excludeoutboundports",
}

// TestIstioTemplatesMatchIstio renders Istio 1.31's own
// istio-sidecar-injector ConfigMap (its istio-discovery chart, rendered
// with helm from the module cache) with Skiff's injector and compares the
// pods of every input of Istio's injector test data with the pods Istio
// expects, as Istio's webhook test compares them.
func TestIstioTemplatesMatchIstio(t *testing.T) {
	dir := filepath.Join(istiochart.Source(t), "pkg", "kube", "inject", "testdata", "inject")
	for _, c := range allIstioCases(t, dir) {
		name := c.want
		if name == "" {
			name = c.in
		}
		t.Run(name, func(t *testing.T) {
			diffs, err := c.run(t, dir)
			checkKnown(t, c, diffs, err, knownDifferences[c.want])
		})
	}
}

// checkKnown fails unless the differences found are exactly those listed.
func checkKnown(t *testing.T, c istioCase, diffs []difference, err error, k known) {
	t.Helper()
	if c.wantErr != "" || k.err != "" {
		msg := ""
		if err != nil {
			msg = strings.ToLower(err.Error())
		}
		switch {
		case k.err != "" && err != nil && strings.Contains(msg, strings.ToLower(k.err)):
		case c.wantErr != "" && err != nil && (strings.Contains(msg, c.wantErr) || strings.Contains(msg, errorNames[c.wantErr])):
		default:
			t.Fatalf("Inject(%s) = %v; want an error about %s%s", c.in, err, c.wantErr, k.err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Inject(%s): %v", c.in, err)
	}
	var got []string
	for _, d := range diffs {
		got = append(got, d.path)
	}
	want := append([]string{}, k.paths...)
	sort.Strings(want)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("differences from Istio's %s (-listed +found):\n%s", c.want, diff)
		listed := map[string]bool{}
		for _, p := range want {
			listed[p] = true
		}
		for _, d := range diffs {
			if !listed[d.path] {
				t.Logf("%s:\n  got:  %v\n  want: %v", d.path, d.got, d.want)
			}
		}
	}
}
