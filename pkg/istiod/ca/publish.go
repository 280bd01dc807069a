package ca

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-mesh/skiff/pkg/kubecache"
)

// rootSource is what the ConfigMap publisher needs from the CA.
type rootSource interface {
	RootCertPEM() []byte
	Changed() <-chan struct{}
}

// rootPublisher keeps the istio-ca-root-cert ConfigMap, holding the root
// bundle under root-cert.pem, in every namespace that is not terminating:
// it creates it in new namespaces, restores it when it is edited or deleted,
// and updates all of them when the bundle changes.
type rootPublisher struct {
	client rest.Interface // core/v1
	roots  rootSource
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[string]
	nsList corelisters.NamespaceLister
	cmList corelisters.ConfigMapLister
}

// PublishConfigMaps keeps the istio-ca-root-cert ConfigMap in every
// namespace (Kubernetes mode) until ctx ends: the singleton istiod runs
// while it leads, with Config.DisableConfigMapPublishing set so that Run
// does not publish from every replica. Each call starts afresh and
// reconciles every namespace first. It does nothing without Config.Client.
func (c *CA) PublishConfigMaps(ctx context.Context) error {
	if c.cfg.Client == nil {
		return nil
	}
	return newRootPublisher(c.cfg.Client, c, c.log).run(ctx)
}

func newRootPublisher(client rest.Interface, roots rootSource, log *slog.Logger) *rootPublisher {
	return &rootPublisher{
		client: client,
		roots:  roots,
		log:    log.With("controller", "root-configmap"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "istio-ca-root-cert"}),
	}
}

// run syncs until ctx ends.
func (p *rootPublisher) run(ctx context.Context) error {
	defer p.queue.ShutDown()
	nsInformer := kubecache.Informer(p.client, "namespaces", "", &corev1.Namespace{}, nil)
	cmInformer := kubecache.Informer(p.client, "configmaps", "", &corev1.ConfigMap{}, kubecache.ByName(RootConfigMapName))
	p.nsList = corelisters.NewNamespaceLister(nsInformer.GetIndexer())
	p.cmList = corelisters.NewConfigMapLister(cmInformer.GetIndexer())

	enqueueNS := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			p.queue.Add(ns.Name)
		}
	}
	enqueueCM := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			p.queue.Add(cm.Namespace)
		}
	}
	if _, err := nsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueNS,
		UpdateFunc: func(_, obj any) { enqueueNS(obj) },
	}); err != nil {
		return fmt.Errorf("root publisher: %w", err)
	}
	if _, err := cmInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { enqueueCM(obj) },
		DeleteFunc: enqueueCM,
	}); err != nil {
		return fmt.Errorf("root publisher: %w", err)
	}
	defer kubecache.Start(ctx, nsInformer, cmInformer)()
	if !cache.WaitForCacheSync(ctx.Done(), nsInformer.HasSynced, cmInformer.HasSynced) {
		return nil // ctx ended
	}
	p.log.Info("publishing root certificate to namespaces")

	done := make(chan struct{})
	go func() {
		defer close(done)
		for p.processNext(ctx) {
		}
	}()
	defer func() { p.queue.ShutDown(); <-done }()

	for {
		ch := p.roots.Changed()
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
			p.enqueueAll()
		}
	}
}

func (p *rootPublisher) enqueueAll() {
	nss, err := p.nsList.List(labels.Everything())
	if err != nil {
		p.log.Error("list namespaces", "err", err)
		return
	}
	for _, ns := range nss {
		p.queue.Add(ns.Name)
	}
}

func (p *rootPublisher) processNext(ctx context.Context) bool {
	ns, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(ns)
	if err := p.sync(ctx, ns); err != nil {
		if ctx.Err() != nil {
			return true
		}
		p.log.Warn("publish root certificate; will retry", "namespace", ns, "err", err)
		p.queue.AddRateLimited(ns)
		return true
	}
	p.queue.Forget(ns)
	return true
}

// sync makes the namespace's ConfigMap hold the current bundle.
func (p *rootPublisher) sync(ctx context.Context, nsName string) error {
	ns, err := p.nsList.Get(nsName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		return nil
	}
	want := string(p.roots.RootCertPEM())
	cm, err := p.cmList.ConfigMaps(nsName).Get(RootConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		err := p.client.Post().Namespace(nsName).Resource("configmaps").Body(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: RootConfigMapName, Namespace: nsName, Labels: map[string]string{"istio.io/config": "true"}},
			Data:       map[string]string{RootConfigMapKey: want},
		}).Do(ctx).Error()
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("configmap %s/%s exists but is not in the cache yet", nsName, RootConfigMapName)
		}
		if err != nil {
			return fmt.Errorf("create configmap %s/%s: %w", nsName, RootConfigMapName, err)
		}
		p.log.Debug("created root configmap", "namespace", nsName)
		return nil
	case err != nil:
		return err
	}
	if cm.Data[RootConfigMapKey] == want {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[RootConfigMapKey] = want
	if err := p.client.Put().Namespace(nsName).Resource("configmaps").Name(RootConfigMapName).Body(cm).Do(ctx).Error(); err != nil {
		return fmt.Errorf("update configmap %s/%s: %w", nsName, RootConfigMapName, err)
	}
	p.log.Debug("updated root configmap", "namespace", nsName)
	return nil
}
