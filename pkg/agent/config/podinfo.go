package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Where Istio's injection templates mount the pod's labels and
// annotations (a downward API volume), relative to the agent's working dir.
const (
	PodLabelsPath      = "etc/istio/pod/labels"
	PodAnnotationsPath = "etc/istio/pod/annotations"
)

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

// ReadPodInfo reads the pod's labels and annotations from the downward API
// files Istio's templates mount (Istio's injector no longer sets
// ISTIO_METAJSON_LABELS). The labels are merged over the environment's, as
// Istio's agent does, without pod-template-hash. A missing file leaves the
// fields as they are; a bad one is an error to report, and leaves them too.
func (c *Config) ReadPodInfo() error {
	file, err := readDownwardAPI(c.Path(PodLabelsPath))
	if err != nil {
		return err
	}
	if file != nil {
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
	}
	ann, err := readDownwardAPI(c.Path(PodAnnotationsPath))
	if err != nil {
		return err
	}
	if ann != nil {
		c.Annotations = ann
	}
	return nil
}

// readDownwardAPI parses a downward API file; a missing one is nil, nil.
func readDownwardAPI(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pod info: %w", err)
	}
	m, err := ParseDownwardAPI(string(b))
	if err != nil {
		return nil, fmt.Errorf("pod info %s: %w", path, err)
	}
	return m, nil
}
