package cloudprovider

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	nodelifecycle "k8s.io/cloud-provider/controllers/nodelifecycle"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/klog/v2"
)

// evacuationPeriod is how often UncordonEvacuated looks: KubeVirt marks a VMI to
// leave its host node at least CAPK's resync (60 s) before CAPK deletes it.
const evacuationPeriod = 15 * time.Second

// NodeMonitorPeriod is how often the node lifecycle controller asks whether the VM
// of each NotReady tenant Node still exists (the cloud-controller-manager's default
// is 5 s; each ask reads the host's API).
const NodeMonitorPeriod = 30 * time.Second

// Run runs, until ctx ends, the controllers of a cloud controller manager that the
// provider serves: Kubernetes' service controller (LoadBalancer Services) and cloud
// node lifecycle controller (deletes a NotReady Node whose VM is gone, taints one
// whose VM is shut down). The cloud node controller is not run: the tenant's
// kubelets do not use an external cloud provider (CAPK gives them their provider
// ID), so Nodes are never waiting for it. A loop uncordons the Nodes CAPK drained
// for a host drain once their VMs run again (UncordonEvacuated). synced is closed
// once the informers have synced.
func Run(ctx context.Context, p *Provider, tenant kubernetes.Interface, synced chan<- struct{}) error {
	p.opts.Tenant = tenant
	p.Initialize(nil, ctx.Done())
	factory := informers.NewSharedInformerFactory(tenant, 0)
	services, nodes := factory.Core().V1().Services(), factory.Core().V1().Nodes()
	sc, err := servicecontroller.New(p, tenant, services, nodes, p.opts.ClusterName, featuregate.NewFeatureGate())
	if err != nil {
		return fmt.Errorf("failed to start the service controller: %w", err)
	}
	lc, err := nodelifecycle.NewCloudNodeLifecycleController(nodes, tenant, p, NodeMonitorPeriod)
	if err != nil {
		return fmt.Errorf("failed to start the node lifecycle controller: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the tenant's %v did not sync", typ)
		}
	}
	close(synced)
	metrics := controllersmetrics.NewControllerManagerMetrics("knest-cloud-controller-manager")
	go lc.Run(ctx, metrics)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		all, err := nodes.Lister().List(labels.Everything())
		if err == nil {
			err = p.UncordonEvacuated(ctx, all)
		}
		if err != nil {
			klog.ErrorS(err, "failed to uncordon evacuated tenant Nodes")
		}
	}, evacuationPeriod)
	sc.Run(ctx, 1, metrics)
	return nil
}
