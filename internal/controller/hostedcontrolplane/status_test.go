package hostedcontrolplane

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
)

// apiServers is the API servers' Deployment as the Deployment controller reports
// it: want replicas in the spec, at generation 2.
func apiServers(want int32, st appsv1.DeploymentStatus) *appsv1.Deployment {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(want),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "apiserver"}},
	}, Status: st}
	d.Generation = 2
	return d
}

// controlPlane is a HostedControlPlane that reported version before and now
// wants v1.35.4.
func controlPlane(version string) *hcpv1.HostedControlPlane {
	hcp := &hcpv1.HostedControlPlane{}
	hcp.Generation = 3
	hcp.Spec.Version = "v1.35.4"
	hcp.Spec.Replicas = ptr.To[int32](1)
	hcp.Status.Version = version
	return hcp
}

func TestSetReplicas(t *testing.T) {
	const old, spec = "v1.34.4", "v1.35.4"
	for _, tc := range []struct {
		name string
		want int32
		st   appsv1.DeploymentStatus
		// upToDate and version are what the contract must read.
		upToDate int32
		version  string
	}{{
		name: "rolled out",
		want: 1, st: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1},
		upToDate: 1, version: spec,
	}, {
		// The Deployment controller has not seen the new template: its counts are
		// the old template's.
		name: "stale observedGeneration",
		want: 1, st: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1},
		upToDate: 0, version: old,
	}, {
		// A surge: the new pod is up, the old still runs the old version.
		name: "mid-rollout",
		want: 1, st: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2},
		upToDate: 1, version: old,
	}, {
		name: "scaling up",
		want: 3, st: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1},
		upToDate: 1, version: old,
	}, {
		name: "none available",
		want: 1, st: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1},
		upToDate: 1, version: old,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hcp := controlPlane(old)
			setReplicas(hcp, apiServers(tc.want, tc.st))
			g.Expect(hcp.Status.UpToDateReplicas).To(HaveValue(Equal(tc.upToDate)))
			g.Expect(hcp.Status.Version).To(Equal(tc.version))
			g.Expect(hcp.Status.Replicas).To(HaveValue(Equal(tc.st.Replicas)))
			g.Expect(hcp.Status.ReadyReplicas).To(HaveValue(Equal(tc.st.ReadyReplicas)))
			g.Expect(hcp.Status.AvailableReplicas).To(HaveValue(Equal(tc.st.AvailableReplicas)))
			g.Expect(hcp.Status.Selector).To(Equal("app=apiserver"))
			g.Expect(hcp.Status.ExternalManagedControlPlane).To(HaveValue(BeTrue()))
		})
	}
}

func TestRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   appsv1.DeploymentStatus
		want bool
	}{
		{"rolled out", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}, true},
		{"stale observedGeneration", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}, false},
		{"old pod still running", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2}, false},
		{"none available", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(rolledOut(apiServers(1, tc.st))).To(Equal(tc.want))
		})
	}
}

func TestSetWaitingForControlPlane(t *testing.T) {
	ready := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	etcd := func(ready int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{ReadyReplicas: ready}}
	}
	for _, tc := range []struct {
		name        string
		hcp         *hcpv1.HostedControlPlane
		etcdStopped bool
		etcd        *appsv1.StatefulSet
		apiServers  appsv1.DeploymentStatus
		// reason is Available's, "" when nothing is waited for.
		reason, message string
	}{{
		name: "serving", hcp: controlPlane("v1.35.4"), etcd: etcd(1), apiServers: ready,
	}, {
		name: "etcd stopped for a restore", hcp: controlPlane("v1.35.4"), etcdStopped: true, etcd: etcd(1), apiServers: ready,
		reason: hcpv1.EtcdStoppedReason,
	}, {
		name: "etcd not ready yet", hcp: controlPlane(""), etcd: etcd(0), apiServers: ready,
		reason: hcpv1.WaitingForEtcdReason,
	}, {
		// Once initialized, a member down does not hold back the tenant's phases.
		name: "etcd not ready once initialized", hcp: initializedControlPlane(), etcd: etcd(0), apiServers: ready,
	}, {
		// An upgrade while scaling to 3: the one pod there is rolled out, but the
		// version is reported only once all 3 run it.
		name: "API servers upgraded and scaling up", hcp: scaledTo3("v1.34.4"), etcd: etcd(1), apiServers: ready,
		reason: hcpv1.WaitingForAPIServerReason, message: "Waiting for an API server at v1.35.4 (1 of 3 available, 1 up to date)",
	}, {
		name: "API servers' Deployment not observed", hcp: controlPlane("v1.35.4"), etcd: etcd(1),
		apiServers: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1},
		reason:     hcpv1.WaitingForAPIServerReason,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := apiServers(ptr.Deref(tc.hcp.Spec.Replicas, 1), tc.apiServers)
			setReplicas(tc.hcp, d)
			waiting := setWaitingForControlPlane(tc.hcp, tc.etcdStopped, tc.etcd, d)
			g.Expect(waiting).To(Equal(tc.reason != ""))
			cond := conditions.Get(tc.hcp, hcpv1.AvailableCondition)
			if tc.reason == "" {
				g.Expect(cond).To(BeNil(), "nothing waited for: the next steps say")
				return
			}
			g.Expect(cond).To(HaveField("Status", metav1.ConditionFalse))
			g.Expect(cond).To(HaveField("Reason", tc.reason))
			if tc.message != "" {
				g.Expect(cond).To(HaveField("Message", tc.message))
			}
		})
	}
}

func initializedControlPlane() *hcpv1.HostedControlPlane {
	hcp := controlPlane("v1.35.4")
	hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	return hcp
}

func scaledTo3(version string) *hcpv1.HostedControlPlane {
	hcp := controlPlane(version)
	hcp.Spec.Replicas = ptr.To[int32](3)
	return hcp
}

func TestSetObservedGeneration(t *testing.T) {
	g := NewWithT(t)
	hcp := controlPlane("v1.35.4")
	hcp.Status.ObservedGeneration = 2
	setObservedGeneration(hcp, errors.New("refused"))
	g.Expect(hcp.Status.ObservedGeneration).To(BeEquivalentTo(2), "a failed reconcile speaks for no generation")
	setObservedGeneration(hcp, nil)
	g.Expect(hcp.Status.ObservedGeneration).To(BeEquivalentTo(3))
}

// Every way the control plane is not available says so with its reason, and
// initialization turns it Available.
func TestAvailableConditions(t *testing.T) {
	failed := &batchv1.JobCondition{Type: batchv1.JobFailed, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}
	for _, tc := range []struct {
		name    string
		set     func(*hcpv1.HostedControlPlane)
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"reconcile failed", func(h *hcpv1.HostedControlPlane) { setReconcileFailed(h, errors.New("admission refused")) },
			metav1.ConditionFalse, hcpv1.ReconcileFailedReason, "admission refused"},
		{"no storage class", setNoStorageClass, metav1.ConditionFalse, hcpv1.NoStorageClassReason, ""},
		{"waiting for the tenant", func(h *hcpv1.HostedControlPlane) { setWaitingForTenant(h, "demo-kubeadm-0123abcd") },
			metav1.ConditionFalse, hcpv1.WaitingForTenantReason, "Waiting for kubeadm's phases in the tenant (Job demo-kubeadm-0123abcd)"},
		{"bootstrap failed, backoff left", func(h *hcpv1.HostedControlPlane) {
			setTenantBootstrapFailed(h, "demo-kubeadm-0123abcd", failed, 2, 19600*time.Millisecond)
		}, metav1.ConditionFalse, hcpv1.TenantBootstrapFailedReason,
			"kubeadm's phases in the tenant failed (Job demo-kubeadm-0123abcd: BackoffLimitExceeded Job has reached the specified backoff limit; 2 in a row); retrying in 20s: its pod's log says why"},
		{"bootstrap failed, backoff past", func(h *hcpv1.HostedControlPlane) {
			setTenantBootstrapFailed(h, "demo-kubeadm-0123abcd", failed, 1, -time.Minute)
		}, metav1.ConditionFalse, hcpv1.TenantBootstrapFailedReason,
			"kubeadm's phases in the tenant failed (Job demo-kubeadm-0123abcd: BackoffLimitExceeded Job has reached the specified backoff limit; 1 in a row); retrying in 0s: its pod's log says why"},
		{"initialized", setInitialized, metav1.ConditionTrue, hcpv1.AvailableReason, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hcp := controlPlane("v1.35.4")
			tc.set(hcp)
			cond := conditions.Get(hcp, hcpv1.AvailableCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(tc.status))
			g.Expect(cond.Reason).To(Equal(tc.reason))
			if tc.message != "" {
				g.Expect(cond.Message).To(Equal(tc.message))
			}
			g.Expect(initialized(hcp)).To(Equal(tc.status == metav1.ConditionTrue))
		})
	}
}
