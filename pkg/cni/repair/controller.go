package repair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-mesh/skiff/pkg/kubecache"
)

// maxAttempts is how often one pod's repair is tried before giving up
// until its next change (Istio: 5).
const maxAttempts = 5

// Controller watches the pods of one node and repairs the broken ones.
type Controller struct {
	cfg      Config
	repairer *Repairer
	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
}

// New returns a controller that watches the pods bound to cfg.NodeName
// (narrowed by cfg's selectors) through client and repairs them with pods.
func New(cfg Config, client rest.Interface, pods Pods, log *slog.Logger) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NodeName == "" {
		return nil, errors.New("repair: no node name (REPAIR_NODE_NAME)")
	}
	log = log.With("component", "cni-repair")
	lw := cache.NewFilteredListWatchFromClient(client, "pods", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = cfg.fieldSelector()
		o.LabelSelector = cfg.LabelSelector
	})
	c := &Controller{
		cfg:      cfg,
		repairer: NewRepairer(cfg, pods, log),
		informer: cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cni-repair"}),
		log: log,
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if err := c.informer.SetTransform(kubecache.StripManagedFields); err != nil {
		return nil, fmt.Errorf("repair: watch pods: %w", err)
	}
	if _, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("repair: watch pods: %w", err)
	}
	return c, nil
}

// Observe calls f with each action taken and its result (metrics, tests).
// Call it before Run.
func (c *Controller) Observe(f func(Action, Result)) { c.repairer.observe = f }

// Run watches and repairs until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	switch {
	case c.cfg.standIn():
		c.log.Warn("in-place repair (REPAIR_REPAIR_PODS) is not implemented: broken pods that a controller owns are deleted instead (it recreates them with capture), bare ones only reported")
	case c.cfg.RepairPods:
		c.log.Warn("in-place repair (REPAIR_REPAIR_PODS) is not implemented: broken pods get the other action set", "action", c.cfg.Action())
	}
	c.log.Info("watching the node's pods for pods started without traffic capture",
		"node", c.cfg.NodeName, "action", string(c.cfg.Action()), "init_container", c.cfg.InitContainerName, "exit_code", c.cfg.InitExitCode)
	defer c.queue.ShutDown()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.informer.RunWithContext(ctx)
	}()
	defer func() { <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return nil // ctx ended first
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
	return nil
}

// next repairs the next queued pod; it returns false once the queue is shut down.
func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	obj, exists, err := c.informer.GetStore().GetByKey(key)
	if err != nil || !exists {
		c.queue.Forget(key)
		return true
	}
	if _, err := c.repairer.Repair(ctx, obj.(*corev1.Pod)); err != nil {
		if c.queue.NumRequeues(key) < maxAttempts-1 {
			c.log.Warn("repair failed, retrying", "pod", key, "err", err)
			c.queue.AddRateLimited(key)
			return true
		}
		c.log.Error("repair failed, giving up until the pod changes", "pod", key, "err", err)
	}
	c.queue.Forget(key)
	return true
}
