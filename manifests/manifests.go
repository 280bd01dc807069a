// Package manifests holds Skiff's Helm charts (base, istiod, istio-cni) and
// embeds them, so that tools built from this module (istioctl kube-inject,
// the injector's defaults) read the same template and values a cluster
// installs.
package manifests

import (
	"embed"
	"fmt"
	"io/fs"
)

// Charts holds the charts, each under charts/NAME.
//
//go:embed all:charts
var Charts embed.FS

// Paths of the files the sidecar injector reads from the istiod chart.
const (
	// InjectionTemplatePath is the sidecar injection template.
	InjectionTemplatePath = "charts/istiod/files/injection-template.yaml"
	// IstiodValuesPath is the istiod chart's values, the injector's defaults.
	IstiodValuesPath = "charts/istiod/values.yaml"
	// CRDsPath is Istio's CustomResourceDefinitions, as published in the
	// istio.io/api module (kubernetes/customresourcedefinitions.gen.yaml).
	CRDsPath = "charts/base/files/crd-all.gen.yaml"
)

// ReadFile returns one embedded file, by its path under this directory.
func ReadFile(path string) ([]byte, error) {
	b, err := fs.ReadFile(Charts, path)
	if err != nil {
		return nil, fmt.Errorf("embedded manifest %s: %w", path, err)
	}
	return b, nil
}
