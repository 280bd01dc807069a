package repair

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Istio's defaults for the repair settings.
const (
	DefaultLabelKey          = "cni.istio.io/uninitialized"
	DefaultLabelValue        = "true"
	DefaultSidecarAnnotation = "sidecar.istio.io/status"
	DefaultInitContainerName = "istio-validation"
	// DefaultInitExitCode is istio-iptables' exit code when validation
	// finds no capture (Istio's ValidationErrorCode).
	DefaultInitExitCode = 126
)

// Config is the repair controller's settings, Istio's REPAIR_* variables.
type Config struct {
	// Enabled runs the controller (REPAIR_ENABLED).
	Enabled bool
	// NodeName is the node whose pods are watched (REPAIR_NODE_NAME).
	NodeName string
	// DeletePods deletes a broken pod (REPAIR_DELETE_PODS); it wins over LabelPods.
	DeletePods bool
	// LabelPods labels a broken pod with LabelKey=LabelValue (REPAIR_LABEL_PODS).
	LabelPods bool
	// RepairPods asks for Istio's in-place repair (REPAIR_REPAIR_PODS),
	// which Skiff does not do. Alone, it deletes the broken pods that a
	// controller owns, which recreates them with capture, and only reports
	// bare pods (nothing would recreate them); with DeletePods or LabelPods
	// set, those act.
	RepairPods bool
	// LabelKey and LabelValue are the label LabelPods sets
	// (REPAIR_BROKEN_POD_LABEL_KEY, REPAIR_BROKEN_POD_LABEL_VALUE).
	LabelKey, LabelValue string
	// SidecarAnnotation, when set, limits repair to pods that carry it
	// (REPAIR_SIDECAR_ANNOTATION): injected pods.
	SidecarAnnotation string
	// InitContainerName is the init container whose failure marks a pod
	// broken (REPAIR_INIT_CONTAINER_NAME); empty matches any.
	InitContainerName string
	// InitTerminationMsg, when set, must equal its termination message,
	// spaces trimmed (REPAIR_INIT_CONTAINER_TERMINATION_MESSAGE).
	InitTerminationMsg string
	// InitExitCode, when not 0, must be its exit code (REPAIR_INIT_CONTAINER_EXIT_CODE).
	InitExitCode int32
	// LabelSelector and FieldSelector narrow the pods watched
	// (REPAIR_LABEL_SELECTORS, REPAIR_FIELD_SELECTORS).
	LabelSelector, FieldSelector string
}

// DefaultConfig is Istio's install-cni defaults: enabled, no action chosen.
func DefaultConfig() Config {
	return Config{
		Enabled: true, LabelKey: DefaultLabelKey, LabelValue: DefaultLabelValue,
		SidecarAnnotation: DefaultSidecarAnnotation, InitContainerName: DefaultInitContainerName,
		InitExitCode: DefaultInitExitCode,
	}
}

// Action is what is done to a broken pod.
type Action string

// The actions, named as Istio's repair metric labels them.
const (
	None   Action = ""
	Delete Action = "delete"
	Label  Action = "label"
)

// Action is what the settings do to a broken pod: delete wins over label,
// as in Istio's chart and controller; RepairPods alone deletes (see
// standIn).
func (c Config) Action() Action {
	switch {
	case c.DeletePods, c.standIn():
		return Delete
	case c.LabelPods:
		return Label
	}
	return None
}

// standIn reports whether deletion stands in for the in-place repair
// asked for: then only pods a controller owns are deleted.
func (c Config) standIn() bool { return c.RepairPods && !c.DeletePods && !c.LabelPods }

// Validate checks the selectors and the label; errors name the variable and the value.
func (c Config) Validate() error {
	if _, err := labels.Parse(c.LabelSelector); err != nil {
		return fmt.Errorf("REPAIR_LABEL_SELECTORS=%q: %w", c.LabelSelector, err)
	}
	if _, err := fields.ParseSelector(c.FieldSelector); err != nil {
		return fmt.Errorf("REPAIR_FIELD_SELECTORS=%q: %w", c.FieldSelector, err)
	}
	if c.Action() == Label {
		if errs := validation.IsQualifiedName(c.LabelKey); len(errs) > 0 {
			return fmt.Errorf("REPAIR_BROKEN_POD_LABEL_KEY=%q: %s", c.LabelKey, errs[0])
		}
		if errs := validation.IsValidLabelValue(c.LabelValue); len(errs) > 0 {
			return fmt.Errorf("REPAIR_BROKEN_POD_LABEL_VALUE=%q: %s", c.LabelValue, errs[0])
		}
	}
	return nil
}

// fieldSelector is the pods watched: those bound to NodeName, and FieldSelector's.
func (c Config) fieldSelector() string {
	s := "spec.nodeName=" + c.NodeName
	if c.FieldSelector != "" {
		s = c.FieldSelector + "," + s
	}
	return s
}
