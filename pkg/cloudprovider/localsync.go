package cloudprovider

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// localResyncPeriod is how often every Local load balancer's endpoints are
// recomputed even without a tenant EndpointSlice event: it catches what happens on
// the host side (a VM restarted with a new address, moved to another host node).
const localResyncPeriod = 30 * time.Second

// localSyncer keeps the host endpoints of externalTrafficPolicy Local load
// balancers current. The service controller calls the provider when a Service or
// the set of Nodes changes, not when the Service's endpoints move between Nodes;
// this loop watches the tenant's EndpointSlices for that. It works from the
// Service and Nodes of the service controller's last call, which it remembers.
type localSyncer struct {
	p     *Provider
	queue workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	services map[string]localService
}

type localService struct {
	svc   *corev1.Service
	nodes []*corev1.Node
}

func newLocalSyncer(p *Provider) *localSyncer {
	return &localSyncer{
		p: p,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "knest-local-endpoints"}),
		services: map[string]localService{},
	}
}

func serviceKey(namespace, name string) string { return namespace + "/" + name }

// remember records the service controller's latest view of a Local Service.
func (s *localSyncer) remember(svc *corev1.Service, nodes []*corev1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services[serviceKey(svc.Namespace, svc.Name)] = localService{svc: svc.DeepCopy(), nodes: append([]*corev1.Node(nil), nodes...)}
}

// forget drops a Service that is no longer a Local load balancer.
func (s *localSyncer) forget(svc *corev1.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.services, serviceKey(svc.Namespace, svc.Name))
}

func (s *localSyncer) get(key string) (localService, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls, ok := s.services[key]
	return ls, ok
}

func (s *localSyncer) enqueueAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.services {
		s.queue.Add(key)
	}
}

// run watches the tenant's EndpointSlices and resyncs until stop closes.
func (s *localSyncer) run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
		s.queue.ShutDown()
	}()
	logger := klog.FromContext(ctx).WithValues("cluster", s.p.opts.ClusterName)

	factory := informers.NewSharedInformerFactoryWithOptions(s.p.opts.Tenant, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName }))
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		key := serviceKey(slice.Namespace, slice.Labels[discoveryv1.LabelServiceName])
		if _, ok := s.get(key); ok {
			s.queue.Add(key)
		}
	}
	if _, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		logger.Error(err, "Failed to watch the tenant's EndpointSlices; Local load balancers follow endpoints only on resync")
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	go wait.Until(s.enqueueAll, localResyncPeriod, ctx.Done())
	for s.processNext(ctx) {
	}
}

func (s *localSyncer) processNext(ctx context.Context) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)
	if err := s.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to update the endpoints of a Local load balancer", "service", key)
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// sync rewrites the host EndpointSlice of one remembered Local Service, if its host
// Service exists (it is the service controller's to create and delete).
func (s *localSyncer) sync(ctx context.Context, key string) error {
	s.p.writeMu.Lock()
	defer s.p.writeMu.Unlock()
	ls, ok := s.get(key)
	if !ok {
		return nil
	}
	host, err := s.p.hostService(ctx, ls.svc)
	if err != nil || host == nil {
		return err
	}
	return s.p.applyEndpointSlice(ctx, ls.svc, host, ls.nodes)
}
