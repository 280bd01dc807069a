package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// PodLabelsPath is where Istio's injection templates mount the pod's
// labels (a downward API volume), relative to the agent's working dir.
const PodLabelsPath = "etc/istio/pod/labels"

// deploymentHashLabel is the ReplicaSet's label, which Istio leaves out of
// the proxy's labels (it changes with every rollout).
const deploymentHashLabel = "pod-template-hash"

// ParseDownwardAPI reads a downward API file of labels or annotations:
// one key="quoted value" per line. A line without "=" is skipped, as
// Istio does; a value that is not a quoted string is an error naming the
// line.
func ParseDownwardAPI(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		u, err := strconv.Unquote(v)
		if err != nil {
			return nil, fmt.Errorf("line %d: value of %q: %s is not a quoted string", i+1, k, v)
		}
		out[k] = u
	}
	return out, nil
}

// ReadPodLabels merges the pod's labels from the downward API file (Istio's
// injector no longer sets ISTIO_METAJSON_LABELS) over the labels from the
// environment, as Istio's agent does, without pod-template-hash. A missing
// file leaves the labels as they are; an unreadable one is an error to
// report, and also leaves them.
func (c *Config) ReadPodLabels() error {
	path := c.Path(PodLabelsPath)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pod labels: %w", err)
	}
	file, err := ParseDownwardAPI(string(b))
	if err != nil {
		return fmt.Errorf("pod labels %s: %w", path, err)
	}
	merged := make(map[string]string, len(c.Labels)+len(file))
	for k, v := range c.Labels {
		merged[k] = v
	}
	for k, v := range file {
		if k != deploymentHashLabel {
			merged[k] = v
		}
	}
	c.Labels = merged
	return nil
}
