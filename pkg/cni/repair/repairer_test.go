package repair_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-mesh/skiff/pkg/cni/repair"
	"github.com/skiff-mesh/skiff/pkg/cni/repair/repairtest"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestRepairer(t *testing.T) {
	del := repair.DefaultConfig()
	del.DeletePods = true
	lbl := repair.DefaultConfig()
	lbl.LabelPods = true
	inPlace := repair.DefaultConfig()
	inPlace.RepairPods = true
	owned := func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: &yes}}
	}
	labelled := func(p *corev1.Pod) { p.Labels[repair.DefaultLabelKey] = "true" }
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }
	for _, tt := range []struct {
		name  string
		cfg   repair.Config
		pod   *corev1.Pod
		want  repair.Action
		calls []repairtest.Call
	}{
		{"delete a broken pod", del, pod("ns", "p", "n", crashLooping(126)), repair.Delete,
			[]repairtest.Call{{Op: "delete", Pod: "ns/p", Arg: ""}, {Op: "event", Pod: "ns/p", Arg: repair.ReasonDelete}}},
		{"label a broken pod", lbl, pod("ns", "p", "n", failedOnce(126, "")), repair.Label,
			[]repairtest.Call{{Op: "label", Pod: "ns/p", Arg: "cni.istio.io/uninitialized=true"}, {Op: "event", Pod: "ns/p", Arg: repair.ReasonLabel}}},
		{"already labelled", lbl, pod("ns", "p", "n", crashLooping(126), labelled), repair.None, nil},
		{"already being deleted", del, pod("ns", "p", "n", crashLooping(126), deleting), repair.None, nil},
		{"healthy", del, pod("ns", "p", "n", passed), repair.None, nil},
		{"in place asked: an owned pod is deleted", inPlace, pod("ns", "p", "n", crashLooping(126), owned), repair.Delete,
			[]repairtest.Call{{Op: "delete", Pod: "ns/p", Arg: ""}, {Op: "event", Pod: "ns/p", Arg: repair.ReasonDelete}}},
		{"in place asked: a bare pod is only reported", inPlace, pod("ns", "p", "n", crashLooping(126)), repair.None, nil},
		{"no action configured", repair.DefaultConfig(), pod("ns", "p", "n", crashLooping(126)), repair.None, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &repairtest.Recorder{}
			got, err := repair.NewRepairer(tt.cfg, rec, quiet()).Repair(context.Background(), tt.pod)
			if err != nil || got != tt.want {
				t.Errorf("Repair = %q, %v; want %q", got, err, tt.want)
			}
			if diff := cmp.Diff(tt.calls, rec.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRepairerFailure: a failed delete is returned (the controller
// retries) and reported in an event, as Istio does.
func TestRepairerFailure(t *testing.T) {
	cfg := repair.DefaultConfig()
	cfg.DeletePods = true
	rec := &repairtest.Recorder{Err: errors.New("forbidden")}
	if _, err := repair.NewRepairer(cfg, rec, quiet()).Repair(context.Background(), pod("ns", "p", "n", crashLooping(126))); err == nil {
		t.Error("Repair hid the failed delete")
	}
	want := []repairtest.Call{{Op: "delete", Pod: "ns/p", Arg: ""}, {Op: "event", Pod: "ns/p", Arg: repair.ReasonDelete}}
	if diff := cmp.Diff(want, rec.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
