package nestedcluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

// reconcileNormal renders the graph, applies it, prunes what the spec no longer
// asks for and reads back what Cluster API reports. What a phase returns is what
// status reports as the failure to apply (see applyError).
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) error {
	for _, phase := range []func(context.Context, *scope) error{
		r.reconcileAccess,
		r.reconcileGraph,
		r.reconcileStale,
	} {
		if err := phase(ctx, s); err != nil {
			return err
		}
	}
	if err := r.observe(ctx, s); err != nil {
		return &observeError{err}
	}
	return nil
}

// observeError is a failure to read back what Cluster API reports: the graph was
// applied, so status does not report it as an apply failure.
type observeError struct{ error }

func (e *observeError) Unwrap() error { return e.error }

// reconcileAccess checks the namespace and binds the controller's role there.
func (r *Reconciler) reconcileAccess(ctx context.Context, s *scope) error {
	return r.ensureAccess(ctx, s.nc.Namespace)
}

// reconcileGraph renders the graph (at the version still rolling out, if one is
// held) and applies it; paused, only the pause itself.
func (r *Reconciler) reconcileGraph(ctx context.Context, s *scope) error {
	log := ctrl.LoggerFrom(ctx)
	desired := s.nc
	held, err := r.heldVersion(ctx, s.nc)
	if err != nil {
		return err
	}
	if held != "" {
		// Render everything else from the spec, at the version still rolling out.
		s.heldVersion = held
		desired = s.nc.DeepCopy()
		desired.Spec.Version = held
	}
	graph, err := cluster.Render(desired, r.Render)
	if err != nil {
		return err
	}
	s.graph = graph

	objs := graph.Objects()
	if s.nc.Spec.Paused {
		// Only propagate the pause itself, which Cluster API's controllers honour for
		// every object of the Cluster; leave everything else as it is.
		objs = []client.Object{graph.Cluster}
	}
	for _, obj := range objs {
		wrote, err := r.applier().Apply(ctx, s.nc, obj)
		if err != nil {
			return err
		}
		if wrote {
			log.V(1).Info("Applied", "kind", obj.GetObjectKind().GroupVersionKind().Kind, "name", obj.GetName())
		}
	}
	if s.nc.Spec.ControlPlane.IsHosted() && !s.nc.Spec.Paused {
		return r.markInfrastructureReady(ctx, graph.KubevirtCluster)
	}
	return nil
}

// reconcileStale deletes what the spec no longer asks for, unless paused.
func (r *Reconciler) reconcileStale(ctx context.Context, s *scope) error {
	if s.nc.Spec.Paused {
		return nil
	}
	if err := r.prune(ctx, s); err != nil {
		return err
	}
	if s.graph.CloudControllerManager == nil {
		// Turned off: the host load balancers it made go too.
		return r.deleteLoadBalancers(ctx, s.nc)
	}
	return nil
}

// markInfrastructureReady says, for CAPK, that the externally managed
// KubevirtCluster of a hosted control plane is ready: there is nothing more to
// provision on the host for it (the endpoint is the HostedControlPlane's).
func (r *Reconciler) markInfrastructureReady(ctx context.Context, desired *capkv1.KubevirtCluster) error {
	kc := &capkv1.KubevirtCluster{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), kc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if kc.Status.Ready {
		return nil
	}
	base := kc.DeepCopy()
	kc.Status.Ready = true
	if err := r.Client.Status().Patch(ctx, kc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("failed to mark KubevirtCluster %s ready: %w", kc.Name, err)
	}
	return nil
}

// heldVersion returns the version Cluster API is still rolling machines to when the
// spec asks for another: the new version waits until that rollout has finished, so
// upgrades never stack (a control plane two versions ahead of nodes still moving).
// It returns "" when nothing is held: same version, nothing rolling, or a control
// plane that has not reported a version yet (not initialized; nothing to roll).
func (r *Reconciler) heldVersion(ctx context.Context, nc *knestv1.NestedCluster) (string, error) {
	cp, err := r.observeControlPlane(ctx, nc)
	if err != nil {
		return "", err
	}
	rolling := cp.version
	if rolling == "" || rolling == nc.Spec.Version || cp.statusVersion == "" {
		return "", nil
	}
	if cp.observedGeneration < cp.generation || cp.statusVersion != rolling || cp.upToDate < cp.current {
		return rolling, nil
	}
	for _, p := range nc.Spec.Workers {
		md := &clusterv1.MachineDeployment{}
		if err := r.get(ctx, nc.Namespace, cluster.PoolName(nc.Name, p.Name), md); err != nil {
			return "", err
		}
		if md.Generation > 0 && (md.Status.ObservedGeneration < md.Generation ||
			ptr.Deref(md.Status.UpToDateReplicas, 0) < ptr.Deref(md.Status.Replicas, 0)) {
			return rolling, nil
		}
	}
	return "", nil
}

// observe reads the Cluster API objects whose status the NestedCluster summarizes.
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	ns := s.nc.Namespace
	s.cluster = &clusterv1.Cluster{}
	if err := r.get(ctx, ns, s.graph.Cluster.Name, s.cluster); err != nil {
		return err
	}
	var err error
	if s.controlPlane, err = r.observeControlPlane(ctx, s.nc); err != nil {
		return err
	}
	s.pools = map[string]*clusterv1.MachineDeployment{}
	for _, p := range s.graph.Pools {
		md := &clusterv1.MachineDeployment{}
		if err := r.get(ctx, ns, p.MachineDeployment.Name, md); err != nil {
			return err
		}
		s.pools[p.Name] = md
	}
	if a := s.graph.Autoscaler; a != nil {
		s.autoscaler = &appsv1.Deployment{}
		if err := r.get(ctx, ns, a.Deployment.Name, s.autoscaler); err != nil {
			return err
		}
	}
	if c := s.graph.CloudControllerManager; c != nil {
		s.cloudControllerManager = &appsv1.Deployment{}
		if err := r.get(ctx, ns, c.Deployment.Name, s.cloudControllerManager); err != nil {
			return err
		}
	}
	if c := s.graph.Storage; c != nil {
		s.csiController = &appsv1.Deployment{}
		if err := r.get(ctx, ns, c.Deployment.Name, s.csiController); err != nil {
			return err
		}
	}
	if err := r.observeVMs(ctx, s); err != nil {
		return err
	}
	r.observeTenant(ctx, s)
	return nil
}

// observeControlPlane reads the cluster's control plane of the spec's mode.
func (r *Reconciler) observeControlPlane(ctx context.Context, nc *knestv1.NestedCluster) (*controlPlaneState, error) {
	name := cluster.ControlPlaneName(nc.Name)
	if nc.Spec.ControlPlane.IsHosted() {
		hcp := &hcpv1.HostedControlPlane{}
		if err := r.get(ctx, nc.Namespace, name, hcp); err != nil {
			return nil, err
		}
		return hcpState(hcp), nil
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := r.get(ctx, nc.Namespace, name, kcp); err != nil {
		return nil, err
	}
	return kcpState(kcp), nil
}

// get reads from the cache; an object the cache has not seen yet reads as empty.
func (r *Reconciler) get(ctx context.Context, ns, name string, obj client.Object) error {
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to read %s: %w", name, err)
	}
	return nil
}

// prune deletes objects knest created for this NestedCluster that the spec no
// longer asks for: removed pools, and templates replaced by a rollout once no
// Cluster API object uses them anymore.
func (r *Reconciler) prune(ctx context.Context, s *scope) error {
	desired := sets.New[string]()
	for _, obj := range s.graph.Objects() {
		desired.Insert(kindKey(obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName()))
	}
	var stale, staleTemplates []client.Object
	for _, k := range []struct {
		kind     string
		list     client.ObjectList
		template bool
	}{
		{"MachineDeployment", &clusterv1.MachineDeploymentList{}, false},
		{"MachineHealthCheck", &clusterv1.MachineHealthCheckList{}, false},
		{"ClusterResourceSet", &addonsv1.ClusterResourceSetList{}, false},
		{"ConfigMap", &corev1.ConfigMapList{}, false},
		{"Deployment", &appsv1.DeploymentList{}, false},
		{"RoleBinding", &rbacv1.RoleBindingList{}, false},
		{"Role", &rbacv1.RoleList{}, false},
		{"ServiceAccount", &corev1.ServiceAccountList{}, false},
		{"KubevirtMachineTemplate", &capkv1.KubevirtMachineTemplateList{}, true},
		{"KubeadmConfigTemplate", &bootstrapv1.KubeadmConfigTemplateList{}, true},
	} {
		objs, err := r.owned(ctx, s.nc, k.list)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			switch {
			case desired.Has(kindKey(k.kind, obj.GetName())):
			case k.template:
				staleTemplates = append(staleTemplates, obj)
			default:
				stale = append(stale, obj)
			}
		}
	}
	if len(staleTemplates) > 0 {
		inUse, err := r.templatesInUse(ctx, s.nc)
		if err != nil {
			return err
		}
		for _, t := range staleTemplates {
			if !inUse.Has(t.GetName()) {
				stale = append(stale, t)
			}
		}
	}
	for _, obj := range stale {
		if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete %T %s: %w", obj, obj.GetName(), err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted object the spec no longer asks for", "type", fmt.Sprintf("%T", obj), "object", klog.KObj(obj))
		if gvk, err := r.Client.GroupVersionKindFor(obj); err == nil && r.Recorder != nil {
			r.Recorder.Eventf(s.nc, corev1.EventTypeNormal, "Pruned", "Deleted %s %s: the spec no longer asks for it", gvk.Kind, obj.GetName())
		}
	}
	return nil
}

// owned lists the objects of one kind that nc controls.
func (r *Reconciler) owned(ctx context.Context, nc *knestv1.NestedCluster, list client.ObjectList) ([]client.Object, error) {
	if err := r.Client.List(ctx, list, client.InNamespace(nc.Namespace), client.MatchingLabels{knestv1.ClusterNameLabel: nc.Name}); err != nil {
		return nil, fmt.Errorf("failed to list owned objects: %w", err)
	}
	var out []client.Object
	err := metaEachListItem(list, func(obj client.Object) {
		if metav1.IsControlledBy(obj, nc) {
			out = append(out, obj)
		}
	})
	return out, err
}

// templatesInUse names the templates a MachineSet references or a machine was
// cloned from. These are read uncached: knest does not otherwise need to watch
// every MachineSet and machine on the host.
func (r *Reconciler) templatesInUse(ctx context.Context, nc *knestv1.NestedCluster) (sets.Set[string], error) {
	inUse := sets.New[string]()
	opts := []client.ListOption{client.InNamespace(nc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: nc.Name}}

	machineSets := &clusterv1.MachineSetList{}
	if err := r.APIReader.List(ctx, machineSets, opts...); err != nil {
		return nil, fmt.Errorf("failed to list MachineSets: %w", err)
	}
	for _, ms := range machineSets.Items {
		inUse.Insert(ms.Spec.Template.Spec.InfrastructureRef.Name, ms.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
	}
	for _, list := range []client.ObjectList{&capkv1.KubevirtMachineList{}, &bootstrapv1.KubeadmConfigList{}} {
		if err := r.APIReader.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("failed to list machines: %w", err)
		}
		if err := metaEachListItem(list, func(obj client.Object) {
			if from := obj.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]; from != "" {
				inUse.Insert(from)
			}
		}); err != nil {
			return nil, err
		}
	}
	return inUse, nil
}

// reconcileDelete deletes the Cluster API Cluster, which makes Cluster API drain
// and delete every machine and VM, and releases the NestedCluster only once the
// Cluster is gone. Everything else knest created is owned by the NestedCluster and
// garbage-collected after it.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	c := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.nc.Namespace, Name: s.nc.Name}, c)
	switch {
	case apierrors.IsNotFound(err):
		// The VMs are gone, and with them the tenant whose Services and volumes the
		// host load balancers and claims stood for: nothing else would delete them.
		if err := r.deleteLoadBalancers(ctx, s.nc); err != nil {
			return err
		}
		if err := r.deleteVolumes(ctx, s.nc); err != nil {
			return err
		}
		controllerutil.RemoveFinalizer(s.nc, knestv1.Finalizer)
		return nil
	case err != nil:
		return fmt.Errorf("failed to read Cluster: %w", err)
	}
	s.cluster = c
	if !metav1.IsControlledBy(c, s.nc) {
		// Not ours (a Cluster of the same name that knest never took over): leave it.
		controllerutil.RemoveFinalizer(s.nc, knestv1.Finalizer)
		return nil
	}
	if c.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, c); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete Cluster %s: %w", c.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleting Cluster", "cluster", klog.KObj(c))
	}
	// The watch on the Cluster brings us back when it is gone.
	return nil
}
