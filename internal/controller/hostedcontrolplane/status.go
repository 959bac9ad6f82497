package hostedcontrolplane

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
)

// setObservedGeneration: the status speaks for this generation only once a
// reconcile of it went through; a failed one leaves Cluster API reading the older
// generation's.
func setObservedGeneration(hcp *hcpv1.HostedControlPlane, reconcileErr error) {
	if reconcileErr == nil {
		hcp.Status.ObservedGeneration = hcp.Generation
	}
}

// setReplicas reports the API server pods as the contract counts machines. The
// version is the spec's once every replica runs it and is available, else the one
// reported before (the oldest still running).
func setReplicas(hcp *hcpv1.HostedControlPlane, d *appsv1.Deployment) {
	st := d.Status
	hcp.Status.ExternalManagedControlPlane = ptr.To(true)
	hcp.Status.Selector = labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()
	hcp.Status.Replicas = ptr.To(st.Replicas)
	hcp.Status.ReadyReplicas = ptr.To(st.ReadyReplicas)
	hcp.Status.AvailableReplicas = ptr.To(st.AvailableReplicas)
	upToDate := int32(0)
	if st.ObservedGeneration >= d.Generation {
		upToDate = st.UpdatedReplicas
	}
	hcp.Status.UpToDateReplicas = ptr.To(upToDate)
	want := ptr.Deref(d.Spec.Replicas, 1)
	if st.ObservedGeneration >= d.Generation && upToDate == want && st.Replicas == want && st.AvailableReplicas >= 1 {
		hcp.Status.Version = hcp.Spec.Version
	}
}

// rolledOut: every API server pod runs the current template and one is available,
// so kubeadm's phases meet the configuration they upload.
func rolledOut(d *appsv1.Deployment) bool {
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == st.Replicas && st.AvailableReplicas >= 1
}

func initialized(hcp *hcpv1.HostedControlPlane) bool {
	return ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false)
}

func setAvailable(hcp *hcpv1.HostedControlPlane, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(hcp, metav1.Condition{Type: hcpv1.AvailableCondition, Status: status, Reason: reason, Message: msg})
}

// setWaitingForControlPlane says what kubeadm's phases wait for, if anything: etcd
// (stopped for a restore, or not ready before the first initialization; once
// initialized, a member down is no reason to stop), or an API server rolled out at
// the spec's version. It returns whether they wait.
func setWaitingForControlPlane(hcp *hcpv1.HostedControlPlane, etcdStopped bool, etcd *appsv1.StatefulSet, apiServers *appsv1.Deployment) bool {
	switch {
	case etcdStopped:
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.EtcdStoppedReason, "etcd is stopped while a restore from a snapshot writes its volume")
	case etcd.Status.ReadyReplicas < 1 && !initialized(hcp):
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.WaitingForEtcdReason, "Waiting for etcd")
	case hcp.Status.Version != hcp.Spec.Version || !rolledOut(apiServers):
		setAvailable(hcp, metav1.ConditionFalse, hcpv1.WaitingForAPIServerReason,
			fmt.Sprintf("Waiting for an API server at %s (%d of %d available, %d up to date)", hcp.Spec.Version,
				ptr.Deref(hcp.Status.AvailableReplicas, 0), ptr.Deref(hcp.Spec.Replicas, 1), ptr.Deref(hcp.Status.UpToDateReplicas, 0)))
	default:
		return false
	}
	return true
}

func setNoStorageClass(hcp *hcpv1.HostedControlPlane) {
	setAvailable(hcp, metav1.ConditionFalse, hcpv1.NoStorageClassReason,
		"etcd needs a volume that outlives its pod and the host has no default StorageClass: make one the default, "+
			"or create the cluster with controlPlane.etcd.storageClassName, or controlPlane.etcd.ephemeral to lose the tenant's objects with the pod")
}

func setWaitingForTenant(hcp *hcpv1.HostedControlPlane, job string) {
	setAvailable(hcp, metav1.ConditionFalse, hcpv1.WaitingForTenantReason,
		fmt.Sprintf("Waiting for kubeadm's phases in the tenant (Job %s)", job))
}

// setTenantBootstrapFailed reports the failed Job; wait is what is left of its
// backoff (none once past).
func setTenantBootstrapFailed(hcp *hcpv1.HostedControlPlane, job string, failed *batchv1.JobCondition, failures int32, wait time.Duration) {
	setAvailable(hcp, metav1.ConditionFalse, hcpv1.TenantBootstrapFailedReason,
		fmt.Sprintf("kubeadm's phases in the tenant failed (Job %s: %s %s; %d in a row); retrying in %s: its pod's log says why",
			job, failed.Reason, failed.Message, failures, max(wait, 0).Round(time.Second)))
}

func setReconcileFailed(hcp *hcpv1.HostedControlPlane, err error) {
	setAvailable(hcp, metav1.ConditionFalse, hcpv1.ReconcileFailedReason, err.Error())
}

// setInitialized: kubeadm's phases went through at the spec's version, so the
// tenant has what `kubeadm join` reads.
func setInitialized(hcp *hcpv1.HostedControlPlane) {
	hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	setAvailable(hcp, metav1.ConditionTrue, hcpv1.AvailableReason, "")
}
