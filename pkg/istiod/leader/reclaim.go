package leader

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errRetryNow ends a term whose campaign should start the next at once.
var errRetryNow = errors.New("lease freed; campaign again now")

// reclaim watches, while this process does not lead, for a lease whose
// holder is a pod that no longer exists, and frees it, reporting true. Such
// a holder cannot renew or release it: helm uninstall deletes istiod's Role
// before its pod stops, so the pod's release on SIGTERM is refused, and a
// reinstalled istiod would wait for the lease to expire (30 s) before
// publishing root certificates into new namespaces, whose pods cannot start
// without them. Only a holder that is evidently a replica of the same
// Deployment is freed (see gone); any other is left to expire as usual.
// The lease is freed only if it is unchanged since it was read, so a holder
// that renewed it keeps it. It looks when the elector observes a new
// holder, and every half retry period.
func (k *Kube) reclaim(ctx context.Context, name string, le *elector, observed <-chan struct{}, log *slog.Logger) bool {
	t := time.NewTicker(k.cfg.RetryPeriod() / 2)
	defer t.Stop()
	seen := ""
	for {
		if h := le.leader(); h != "" && h != k.cfg.Identity {
			if k.gone(ctx, h) {
				if k.free(ctx, name, h) {
					log.Info("freed the lease of a replica whose pod no longer exists", "holder", h)
					return true
				}
			} else if h != seen {
				log.Debug("the lease's holder is running (or could not be looked up); waiting", "holder", h)
			}
			seen = h
		}
		select {
		case <-ctx.Done():
			return false
		case <-observed:
		case <-t.C:
		}
	}
}

// gone reports whether holder is a replica of this process's Deployment
// whose pod the API server says does not exist. Both names must be pod
// names of one Deployment ("istiod-<hash>-<id>"), and this process's own
// pod must exist in the namespace: an istiod outside the cluster, or whose
// POD_NAME names no pod here (an external control plane, tests), never
// frees a lease, since its peers' pods could not be found either.
func (k *Kube) gone(ctx context.Context, holder string) bool {
	if d := deployment(k.cfg.Identity); d == "" || d != deployment(holder) {
		return false
	}
	if !k.selfIsPod(ctx) {
		return false
	}
	return apierrors.IsNotFound(k.getPod(ctx, holder))
}

// selfIsPod reports whether this process's identity is a pod of the
// namespace; a definite answer is kept.
func (k *Kube) selfIsPod(ctx context.Context) bool {
	k.selfMu.Lock()
	defer k.selfMu.Unlock()
	if k.self == nil {
		switch err := k.getPod(ctx, k.cfg.Identity); {
		case err == nil:
			k.self = new(true)
		case apierrors.IsNotFound(err):
			k.self = new(false)
		default:
			return false // ask again next time
		}
	}
	return *k.self
}

// getPod reads the pod called name in the namespace; only its error is
// wanted.
func (k *Kube) getPod(ctx context.Context, name string) error {
	var p corev1.Pod
	return k.client.Core.Get().Namespace(k.cfg.Namespace).Resource("pods").Name(name).Do(ctx).Into(&p)
}

// deployment is the Deployment a pod name of the form NAME-HASH-ID belongs
// to (NAME), or "" for a name not of that form.
func deployment(pod string) string {
	i := strings.LastIndexByte(pod, '-')
	if i <= 0 {
		return ""
	}
	j := strings.LastIndexByte(pod[:i], '-')
	if j <= 0 || j+1 == i {
		return ""
	}
	return pod[:j]
}

// free releases lease name if holder still holds it, as the holder's own
// release would have (no holder, a one-second duration).
func (k *Kube) free(ctx context.Context, name, holder string) bool {
	leases := k.client.Coordination
	var l coordinationv1.Lease
	err := leases.Get().Namespace(k.cfg.Namespace).Resource("leases").Name(name).Do(ctx).Into(&l)
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		return false
	}
	one, now := int32(1), metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = nil, &one
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	return leases.Put().Namespace(k.cfg.Namespace).Resource("leases").Name(name).Body(&l).Do(ctx).Error() == nil
}
