package model

import (
	"cmp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// object is any Kubernetes-style object.
type object interface {
	GetNamespace() string
	GetName() string
	GetCreationTimestamp() metav1.Time
}

// sortedByAge returns a copy of objs, oldest first, then by namespace/name,
// the order Istio uses to break ties between conflicting objects.
func sortedByAge[T object](objs []T) []T {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b T) int {
		ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
		return cmp.Or(ta.Time.Compare(tb.Time),
			strings.Compare(a.GetNamespace(), b.GetNamespace()),
			strings.Compare(a.GetName(), b.GetName()))
	})
	return out
}
