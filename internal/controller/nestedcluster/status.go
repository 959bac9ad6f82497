package nestedcluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/apply"
	"github.com/knest-dev/knest/internal/tenant"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/kubever"
)

// ownedConditions are the condition types this controller writes; the patch helper
// resolves conflicts on them in our favour.
var ownedConditions = []string{
	knestv1.ReadyCondition,
	knestv1.TopologyReconciledCondition,
	knestv1.InfrastructureReadyCondition,
	knestv1.ControlPlaneReadyCondition,
	knestv1.WorkersReadyCondition,
	knestv1.TenantStateCondition,
	knestv1.EtcdPersistentCondition,
	knestv1.WorkersScalableCondition,
	knestv1.AutoscalerReadyCondition,
	knestv1.LoadBalancerReadyCondition,
	knestv1.StorageReadyCondition,
	knestv1.HostSpreadCondition,
	knestv1.LiveMigratableCondition,
	knestv1.HostNodesReadyCondition,
}

// summarize computes the NestedCluster's status from what one reconcile observed
// and the error it failed to apply the graph with (nil when it did not).
func summarize(nc *knestv1.NestedCluster, s *scope, applyErr error) {
	st := &nc.Status
	cp := s.controlPlane
	initialized := cp != nil && cp.initialized

	st.ControlPlane = knestv1.ReplicaStatus{Desired: nc.Spec.ControlPlane.Replicas}
	if cp != nil {
		st.ControlPlane.Ready = cp.ready
		st.ControlPlane.Current = cp.current
		st.ControlPlane.UpToDate = cp.upToDate
		st.Version = cp.statusVersion
	}
	st.Workers = nil
	var workers knestv1.ReplicaStatus
	for _, p := range nc.Spec.Workers {
		ps := knestv1.PoolStatus{Name: p.Name}
		if cluster.Autoscaled(p) {
			// The autoscaler's choice, which it writes to the MachineDeployment.
			ps.Autoscaling = p.Autoscaling.DeepCopy()
			if md := s.pools[p.Name]; md != nil {
				ps.Desired = ptr.Deref(md.Spec.Replicas, 0)
			}
		} else {
			ps.Desired = *cluster.PoolReplicas(p)
		}
		if md := s.pools[p.Name]; md != nil {
			ps.Ready = ptr.Deref(md.Status.ReadyReplicas, 0)
			ps.Current = ptr.Deref(md.Status.Replicas, 0)
			ps.UpToDate = ptr.Deref(md.Status.UpToDateReplicas, 0)
			ps.Version = md.Spec.Template.Spec.Version
		}
		ps.NewMachinesBlocked = newMachinesBlocked(s, p.Name)
		workers.Desired += ps.Desired
		workers.Ready += ps.Ready
		workers.Current += ps.Current
		st.Workers = append(st.Workers, ps)
	}
	st.ControlPlaneReady = fmt.Sprintf("%d/%d", st.ControlPlane.Ready, st.ControlPlane.Desired)
	st.WorkersReady = fmt.Sprintf("%d/%d", workers.Ready, workers.Desired)
	st.Endpoint = endpoint(s.cluster)
	if initialized {
		st.KubeconfigSecretName = cluster.KubeconfigSecretName(nc.Name)
	}

	setTopologyReconciledCondition(nc, s, applyErr)
	setInfrastructureReadyCondition(nc, s.cluster)
	setControlPlaneReadyCondition(nc, s)
	setWorkersReadyCondition(nc, s)
	setTenantStateCondition(nc, s)
	setEtcdPersistentCondition(nc, s)
	setWorkersScalableCondition(nc)
	setAutoscalerReadyCondition(nc, s)
	setLoadBalancerReadyCondition(nc, s)
	setStorageReadyCondition(nc, s)
	setHostSpreadCondition(nc, s.vms)
	setLiveMigratableCondition(nc, s.vms)
	setHostNodesReadyCondition(nc, s.vms, s.hostNodes)
	setReadyCondition(nc)
	st.Phase = phase(nc, s, initialized, applyErr)
}

func endpoint(c *clusterv1.Cluster) string {
	if c == nil || !c.Spec.ControlPlaneEndpoint.IsValid() {
		return ""
	}
	ep := c.Spec.ControlPlaneEndpoint
	return "https://" + net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
}

func setTopologyReconciledCondition(nc *knestv1.NestedCluster, s *scope, applyErr error) {
	c := metav1.Condition{Type: knestv1.TopologyReconciledCondition, Status: metav1.ConditionTrue, Reason: knestv1.ReconciledReason}
	switch {
	case !nc.DeletionTimestamp.IsZero():
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, knestv1.DeletingReason, "The cluster is being deleted"
		// Cluster API says what its deletion waits for (machines draining, the control plane).
		if d := clusterCondition(s.cluster, clusterv1.ClusterDeletingCondition); d != nil && d.Status == metav1.ConditionTrue && d.Message != "" {
			c.Message += "; Cluster API: " + d.Message
		}
	case errors.As(applyErr, new(*tenant.NamespaceNotEnabledError)):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, knestv1.NamespaceNotEnabledReason, applyErr.Error()
	case applyErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, knestv1.ApplyFailedReason, applyErr.Error()
	case nc.Spec.Paused:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, knestv1.PausedReason, "spec.paused is true: knest and Cluster API leave the cluster as it is"
	case s.heldVersion != "":
		c.Status, c.Reason = metav1.ConditionFalse, knestv1.UpgradeHeldReason
		c.Message = fmt.Sprintf("spec.version %s waits until every machine has rolled out to %s; upgrades do not stack", nc.Spec.Version, s.heldVersion)
	}
	conditions.Set(nc, c)
}

func setInfrastructureReadyCondition(nc *knestv1.NestedCluster, c *clusterv1.Cluster) {
	cond := metav1.Condition{Type: knestv1.InfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: knestv1.WaitingForInfraReason,
		Message: "Waiting for the KubevirtCluster and the API server Service on the host"}
	if c != nil && ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false) {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, knestv1.ReadyReason, ""
	}
	conditions.Set(nc, cond)
}

func setControlPlaneReadyCondition(nc *knestv1.NestedCluster, s *scope) {
	got := s.controlPlane
	cp := nc.Status.ControlPlane
	cond := metav1.Condition{Type: knestv1.ControlPlaneReadyCondition, Status: metav1.ConditionTrue, Reason: knestv1.ReadyReason}
	want := desiredControlPlane(s.graph)
	switch {
	case !nc.DeletionTimestamp.IsZero():
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.DeletingReason
		cond.Message = "The control plane is deleted with the cluster"
	case s.stateLost():
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.StateLostReason
		cond.Message = "The control plane answers as a new, empty cluster (condition TenantState)"
	case got != nil && got.blocked != nil:
		// A hosted control plane that cannot go on by itself says why.
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, got.blocked.Reason, got.blocked.Message
	case got == nil || !got.initialized:
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.WaitingForControlPlaneReason
		cond.Message = fmt.Sprintf("Waiting for the first control-plane node to run kubeadm init (%d/%d ready)", cp.Ready, cp.Desired)
		if nc.Spec.ControlPlane.IsHosted() {
			cond.Message = fmt.Sprintf("Waiting for the hosted API server and kubeadm's phases in the tenant (%d/%d ready)", cp.Ready, cp.Desired)
		}
	case got.observedGeneration < got.generation || want != nil && (got.replicas != want.replicas ||
		got.version != want.version || got.template != want.template):
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.ChangePendingReason
		cond.Message = "Cluster API has not yet observed the latest control-plane change"
	case got.statusVersion != "" && got.statusVersion != nc.Spec.Version:
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.RollingOutReason
		cond.Message = fmt.Sprintf("Upgrading the control plane from %s to %s", got.statusVersion, nc.Spec.Version)
	case got.upToDate < cp.Current:
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.RollingOutReason
		cond.Message = fmt.Sprintf("Rolling out the control plane: %d of %d nodes up to date", got.upToDate, cp.Current)
	case cp.Current > cp.Desired:
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.ScalingDownReason
		cond.Message = fmt.Sprintf("Removing control-plane nodes: %d exist, %d desired", cp.Current, cp.Desired)
	case cp.Ready < cp.Desired || cp.Current < cp.Desired:
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.ScalingUpReason
		cond.Message = fmt.Sprintf("%d of %d control-plane nodes ready", cp.Ready, cp.Desired)
	}
	if why := unschedulable(s.vms, knestv1.ControlPlanePool); why != "" && cond.Status == metav1.ConditionFalse && nc.DeletionTimestamp.IsZero() {
		cond.Message += "; " + why
	}
	conditions.Set(nc, cond)
}

func setWorkersReadyCondition(nc *knestv1.NestedCluster, s *scope) {
	cond := metav1.Condition{Type: knestv1.WorkersReadyCondition, Status: metav1.ConditionTrue, Reason: knestv1.ReadyReason}
	var waiting []string
	for _, p := range nc.Status.Workers {
		var want *clusterv1.MachineDeployment
		if s.graph != nil {
			for _, gp := range s.graph.Pools {
				if gp.Name == p.Name {
					want = gp.MachineDeployment
				}
			}
		}
		reason, msg := poolShortfall(p, want, s.pools[p.Name])
		if reason == "" {
			continue
		}
		if len(waiting) == 0 {
			cond.Status, cond.Reason = metav1.ConditionFalse, reason
		}
		if why := unschedulable(s.vms, p.Name); why != "" {
			msg += " (" + why + ")"
		}
		waiting = append(waiting, fmt.Sprintf("%s %s", p.Name, msg))
	}
	if len(waiting) > 0 {
		cond.Message = "Worker pools not ready: " + strings.Join(waiting, ", ")
	}
	conditions.Set(nc, cond)
}

// newMachinesBlocked says why Cluster API creates no machines for the named pool,
// or returns "": the versions compared are those knest renders (Cluster API's
// MachineSet preflight checks compare the MachineSet's with the control plane's
// spec.version), or, when nothing could be rendered, those observed.
func newMachinesBlocked(s *scope, pool string) string {
	var poolVersion, cpVersion string
	if want := desiredControlPlane(s.graph); want != nil {
		cpVersion = want.version
		for _, gp := range s.graph.Pools {
			if gp.Name == pool {
				poolVersion = gp.MachineDeployment.Spec.Template.Spec.Version
			}
		}
	} else {
		if s.controlPlane != nil {
			cpVersion = s.controlPlane.version
		}
		if md := s.pools[pool]; md != nil {
			poolVersion = md.Spec.Template.Spec.Version
		}
	}
	if !kubever.NewMachinesBlocked(poolVersion, cpVersion) {
		return ""
	}
	return fmt.Sprintf("held at %s under a control plane at %s: Cluster API's MachineSet preflight check KubeadmVersionSkew creates machines only at the control plane's minor", poolVersion, cpVersion)
}

// setAutoscalerReadyCondition says whether the tenant's cluster-autoscaler runs:
// its Deployment has an available pod, which its readiness probe (the
// autoscaler's own health check) passed. Absent while no pool is autoscaled.
func setAutoscalerReadyCondition(nc *knestv1.NestedCluster, s *scope) {
	if s.graph == nil || s.graph.Autoscaler == nil {
		conditions.Delete(nc, knestv1.AutoscalerReadyCondition)
		return
	}
	conditions.Set(nc, deploymentCondition(knestv1.AutoscalerReadyCondition, s.graph.Autoscaler.Deployment.Name, s.autoscaler))
}

// setLoadBalancerReadyCondition says whether the tenant's cloud controller manager
// runs: its Deployment has an available pod, ready once it has read the tenant's
// Services and Nodes. Absent while the provider is turned off.
func setLoadBalancerReadyCondition(nc *knestv1.NestedCluster, s *scope) {
	if s.graph == nil || s.graph.CloudControllerManager == nil {
		conditions.Delete(nc, knestv1.LoadBalancerReadyCondition)
		return
	}
	conditions.Set(nc, deploymentCondition(knestv1.LoadBalancerReadyCondition, s.graph.CloudControllerManager.Deployment.Name, s.cloudControllerManager))
}

// setStorageReadyCondition says whether the controller of the tenant's CSI driver
// runs: its Deployment (driver and sidecars) has an available pod. Absent while the
// provider is turned off.
func setStorageReadyCondition(nc *knestv1.NestedCluster, s *scope) {
	if s.graph == nil || s.graph.Storage == nil {
		conditions.Delete(nc, knestv1.StorageReadyCondition)
		return
	}
	conditions.Set(nc, deploymentCondition(knestv1.StorageReadyCondition, s.graph.Storage.Deployment.Name, s.csiController))
}

// deploymentCondition is condition t of a provider that one Deployment runs: True
// (Running) once it has an available pod at its current generation.
func deploymentCondition(t, name string, d *appsv1.Deployment) metav1.Condition {
	if d != nil && d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas > 0 {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: knestv1.ProviderRunningReason,
			Message: fmt.Sprintf("Deployment %s is available and passes its health check", name)}
	}
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: knestv1.ProviderStartingReason,
		Message: fmt.Sprintf("Deployment %s has no available pod yet", name)}
}

// setWorkersScalableCondition says which pools Cluster API creates no machines for
// (status.workers[].newMachinesBlocked) and what to do about it.
func setWorkersScalableCondition(nc *knestv1.NestedCluster) {
	cond := metav1.Condition{Type: knestv1.WorkersScalableCondition, Status: metav1.ConditionTrue, Reason: knestv1.ScalableReason}
	var held []string
	for _, p := range nc.Status.Workers {
		if p.NewMachinesBlocked != "" {
			held = append(held, fmt.Sprintf("%s (%s)", p.Name, p.Version))
		}
	}
	if len(held) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.PoolVersionHeldReason
		cond.Message = fmt.Sprintf("Cluster API creates no machines for pools held at an older minor than the control plane (%s): "+
			"its MachineSet preflight check KubeadmVersionSkew joins nodes only at the control plane's minor, so they cannot scale up, "+
			"replace an unhealthy machine or roll out a changed machine shape; "+
			"upgrade them to the control plane's minor (knest upgrade %s --version %s --release-pool POOL)",
			strings.Join(held, ", "), nc.Name, nc.Spec.Version)
	}
	conditions.Set(nc, cond)
}

// poolShortfall says what keeps a pool from where its spec wants it, or returns an
// empty reason. A pool is there when Cluster API has observed the MachineDeployment
// knest renders now (want; nil when unknown) and all its machines exist, are up to
// date and ready, with none to spare: not mid-surge, not mid-scale-down. An
// autoscaled pool's MachineDeployment has no replicas knest wants (want's are nil):
// its desired count is the autoscaler's (p.Desired).
func poolShortfall(p knestv1.PoolStatus, want, md *clusterv1.MachineDeployment) (reason, msg string) {
	switch {
	case md == nil || md.Generation == 0:
		return knestv1.NodesNotReadyReason, fmt.Sprintf("%d/%d", p.Ready, p.Desired)
	case md.Status.ObservedGeneration < md.Generation || want != nil && (want.Spec.Replicas != nil && ptr.Deref(md.Spec.Replicas, 0) != *want.Spec.Replicas ||
		md.Spec.Template.Spec.InfrastructureRef.Name != want.Spec.Template.Spec.InfrastructureRef.Name ||
		md.Spec.Template.Spec.Bootstrap.ConfigRef.Name != want.Spec.Template.Spec.Bootstrap.ConfigRef.Name ||
		md.Spec.Template.Spec.Version != want.Spec.Template.Spec.Version):
		return knestv1.ChangePendingReason, "(change not yet observed by Cluster API)"
	case ptr.Deref(md.Status.UpToDateReplicas, 0) < p.Current:
		return knestv1.RollingOutReason, fmt.Sprintf("%d/%d (rolling out: %d of %d up to date)", p.Ready, p.Desired, ptr.Deref(md.Status.UpToDateReplicas, 0), p.Current)
	case p.Current > p.Desired:
		return knestv1.ScalingDownReason, fmt.Sprintf("%d/%d (scaling down from %d)", p.Ready, p.Desired, p.Current)
	case p.Current < p.Desired && p.NewMachinesBlocked != "":
		return knestv1.PoolVersionHeldReason, fmt.Sprintf("%d/%d (Cluster API creates no machines for it: condition WorkersScalable)", p.Ready, p.Desired)
	case p.Ready < p.Desired || p.Current < p.Desired:
		return knestv1.NodesNotReadyReason, fmt.Sprintf("%d/%d", p.Ready, p.Desired)
	}
	return "", ""
}

// setEtcdPersistentCondition says whether the tenant's etcd outlives its pod or
// VM: on a claim of the host's unless the spec made it ephemeral.
func setEtcdPersistentCondition(nc *knestv1.NestedCluster, s *scope) {
	cond := metav1.Condition{Type: knestv1.EtcdPersistentCondition, Status: metav1.ConditionTrue, Reason: knestv1.PersistentVolumeReason}
	switch {
	case nc.Spec.ControlPlane.IsHosted():
		got := s.controlPlane
		if got == nil || got.etcdPersistent == nil {
			// Not decided yet (the HostedControlPlane has not picked a volume).
			return
		}
		if !*got.etcdPersistent {
			cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.EphemeralEtcdReason
			cond.Message = "etcd is on an emptyDir (controlPlane.etcd.ephemeral): the tenant's objects are lost with its pod"
		}
	case nc.Spec.ControlPlane.Etcd.Ephemeral:
		cond.Status, cond.Reason = metav1.ConditionFalse, knestv1.EphemeralEtcdReason
		cond.Message = "etcd is on the control-plane VMs' root disks (controlPlane.etcd.ephemeral): a VM that KubeVirt restarts comes back without the tenant's objects"
	}
	conditions.Set(nc, cond)
}

// setReadyCondition is the summary: the first condition that is not True decides.
func setReadyCondition(nc *knestv1.NestedCluster) {
	cond := metav1.Condition{Type: knestv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: knestv1.ReadyReason, Message: "The tenant cluster is ready"}
	// A lost state comes first: everything else may look up.
	if c := conditions.Get(nc, knestv1.TenantStateCondition); c != nil && c.Status == metav1.ConditionFalse {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, c.Reason, c.Message
		conditions.Set(nc, cond)
		return
	}
	for _, t := range []string{
		knestv1.TopologyReconciledCondition,
		knestv1.InfrastructureReadyCondition,
		knestv1.ControlPlaneReadyCondition,
		knestv1.WorkersReadyCondition,
	} {
		if c := conditions.Get(nc, t); c != nil && c.Status != metav1.ConditionTrue {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, c.Reason, c.Message
			break
		}
	}
	conditions.Set(nc, cond)
}

// phase picks the one-word summary. Provisioning lasts until the cluster was
// ready once; later shortfalls are Scaling, version or template rollouts Upgrading.
func phase(nc *knestv1.NestedCluster, s *scope, initialized bool, applyErr error) knestv1.Phase {
	switch {
	case !nc.DeletionTimestamp.IsZero():
		return knestv1.PhaseDeleting
	case failed(s, applyErr) || s.stateLost():
		return knestv1.PhaseFailed
	case nc.Spec.Paused:
		return knestv1.PhasePaused
	case !initialized:
		return knestv1.PhaseProvisioning
	case conditions.IsTrue(nc, knestv1.ReadyCondition):
		return knestv1.PhaseRunning
	// Before that, a new MachineDeployment's first machine counts as not up to date
	// for a moment; that is no rollout.
	case nc.Status.Phase == knestv1.PhaseProvisioning || nc.Status.Phase == "":
		return knestv1.PhaseProvisioning
	case s.heldVersion != "" || conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition) == knestv1.RollingOutReason || rollingOut(s):
		return knestv1.PhaseUpgrading
	default:
		return knestv1.PhaseScaling
	}
}

// failed tells an apply error that retrying will not fix: the API server refused
// what knest rendered, the spec could not be rendered, or an object in the way is
// someone else's.
func failed(s *scope, applyErr error) bool {
	var notOwned *apply.NotOwnedError
	return applyErr != nil && (apierrors.IsInvalid(applyErr) || s.graph == nil || errors.As(applyErr, &notOwned))
}

// rollingOut is true while a MachineDeployment still has machines from an older
// template (a version or VM shape change); a plain scale-up is not a rollout.
func rollingOut(s *scope) bool {
	for _, md := range s.pools {
		if ptr.Deref(md.Status.UpToDateReplicas, 0) < ptr.Deref(md.Status.Replicas, 0) {
			return true
		}
	}
	return false
}

func clusterCondition(c *clusterv1.Cluster, t string) *metav1.Condition {
	if c == nil {
		return nil
	}
	return conditions.Get(c, t)
}

func readyMessage(nc *knestv1.NestedCluster) string {
	return conditions.GetMessage(nc, knestv1.ReadyCondition)
}
