package repair

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pods changes pods in the cluster; Kube is the API server's, repairtest's
// Recorder a fake that records the calls.
type Pods interface {
	// Delete deletes pod if it is still the object given (same UID and
	// resource version).
	Delete(ctx context.Context, pod *corev1.Pod) error
	// Label sets the label key=value on pod.
	Label(ctx context.Context, pod *corev1.Pod, key, value string) error
	// Event records a warning event about pod.
	Event(ctx context.Context, pod *corev1.Pod, reason, message string) error
}

// Event reasons, Istio's.
const (
	ReasonDelete = "DeleteBrokenPod"
	ReasonLabel  = "LabelBrokenPod"
)

// Result is what Repair did to one pod, for logs and metrics.
type Result string

// The results, named as Istio's repair metric labels them.
const (
	Skipped   Result = "skip"
	Succeeded Result = "success"
	Failed    Result = "fail"
)

// Repairer applies the settings to one pod at a time.
type Repairer struct {
	cfg  Config
	pods Pods
	log  *slog.Logger
	// observe, when set, is told each action taken and its result.
	observe func(Action, Result)
}

// NewRepairer returns a Repairer that changes pods through pods.
func NewRepairer(cfg Config, pods Pods, log *slog.Logger) *Repairer {
	return &Repairer{cfg: cfg, pods: pods, log: log}
}

// Repair looks at pod and, when it is broken, takes the configured action.
// It returns the action taken (None for a healthy pod, one already being
// deleted or already labelled, or when no action is configured).
func (r *Repairer) Repair(ctx context.Context, pod *corev1.Pod) (Action, error) {
	if pod.DeletionTimestamp != nil || !r.cfg.Broken(pod) {
		return None, nil
	}
	log := r.log.With("pod", pod.Namespace+"/"+pod.Name)
	a := r.cfg.Action()
	switch a {
	case None:
		log.Warn("pod started without traffic capture (its istio-validation init container failed); no repair action is configured (set REPAIR_DELETE_PODS or REPAIR_LABEL_PODS)")
		return None, nil
	case Label:
		if _, ok := pod.Labels[r.cfg.LabelKey]; ok {
			r.record(a, Skipped)
			return None, nil
		}
	case Delete:
		if r.cfg.standIn() && metav1.GetControllerOf(pod) == nil {
			log.Warn("pod started without traffic capture (its istio-validation init container failed); it has no owner to recreate it, so it is not deleted in place of the in-place repair asked for (REPAIR_REPAIR_PODS): delete it yourself")
			r.record(a, Skipped)
			return None, nil
		}
	}
	var err error
	reason, done := ReasonDelete, "deleted"
	if a == Delete {
		log.Info("pod started without traffic capture, deleting it so that its owner recreates it")
		err = r.pods.Delete(ctx, pod)
	} else {
		reason, done = ReasonLabel, "labeled"
		log.Info("pod started without traffic capture, labelling it", "label", r.cfg.LabelKey+"="+r.cfg.LabelValue)
		err = r.pods.Label(ctx, pod, r.cfg.LabelKey, r.cfg.LabelValue)
	}
	msg := "pod detected as broken, " + done
	if err != nil {
		r.record(a, Failed)
		msg = fmt.Sprintf("pod detected as broken, but failed to %s it: %v", a, err)
	} else {
		r.record(a, Succeeded)
	}
	if evErr := r.pods.Event(ctx, pod, reason, msg); evErr != nil {
		log.Warn("could not record an event", "err", evErr)
	}
	if err != nil {
		return a, fmt.Errorf("%s pod %s/%s: %w", a, pod.Namespace, pod.Name, err)
	}
	return a, nil
}

func (r *Repairer) record(a Action, res Result) {
	if r.observe != nil {
		r.observe(a, res)
	}
}
