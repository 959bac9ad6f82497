package nestedcluster

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

func TestSummarize(t *testing.T) {
	// Helpers build what Cluster API reports, including the states that must not read
	// as Ready: more machines than desired (a surge, a scale-down), fewer up to date
	// (a rollout), and a generation it has not observed yet.
	kcp := func(initialized bool, ready, replicas int32, version string) *controlplanev1.KubeadmControlPlane {
		k := &controlplanev1.KubeadmControlPlane{}
		k.Generation, k.Status.ObservedGeneration = 1, 1
		k.Spec.Replicas = ptr.To(int32(1))
		k.Status.Initialization.ControlPlaneInitialized = ptr.To(initialized)
		k.Status.ReadyReplicas = ptr.To(ready)
		k.Status.Replicas = ptr.To(replicas)
		k.Status.UpToDateReplicas = ptr.To(replicas)
		k.Status.Version = version
		return k
	}
	// hcp is what knest's HostedControlPlane controller reports, like kcp.
	hcp := func(initialized bool, ready, replicas int32, version string) *controlPlaneState {
		h := &hcpv1.HostedControlPlane{}
		h.Generation, h.Status.ObservedGeneration = 1, 1
		h.Spec.Replicas = ptr.To(int32(1))
		h.Status.Initialization.ControlPlaneInitialized = ptr.To(initialized)
		h.Status.ReadyReplicas = ptr.To(ready)
		h.Status.Replicas = ptr.To(replicas)
		h.Status.UpToDateReplicas = ptr.To(replicas)
		h.Status.Version = version
		return hcpState(h)
	}
	md := func(replicas, ready, upToDate int32) *clusterv1.MachineDeployment {
		m := &clusterv1.MachineDeployment{}
		m.Generation, m.Status.ObservedGeneration = 1, 1
		m.Spec.Replicas = ptr.To(int32(2))
		m.Status.Replicas = ptr.To(replicas)
		m.Status.ReadyReplicas = ptr.To(ready)
		m.Status.UpToDateReplicas = ptr.To(upToDate)
		return m
	}
	unobserved := func(m *clusterv1.MachineDeployment) *clusterv1.MachineDeployment {
		m.Generation++
		return m
	}
	pools := func(m *clusterv1.MachineDeployment) map[string]*clusterv1.MachineDeployment {
		return map[string]*clusterv1.MachineDeployment{"workers": m}
	}
	// rendered is the graph knest applies for the spec under test, with the pool at want
	// replicas: a cached MachineDeployment that differs is one Cluster API has not seen
	// the change of.
	rendered := func(want int32) *cluster.Graph {
		m := md(0, 0, 0)
		m.Spec.Replicas = ptr.To(want)
		return &cluster.Graph{ControlPlane: kcp(false, 0, 0, ""), Pools: []cluster.Pool{{Name: "workers", MachineDeployment: m}}}
	}
	infra := &clusterv1.Cluster{}
	infra.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	infra.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.96.0.10", Port: 6443}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "MachineDeployment"}, "x", field.ErrorList{field.Invalid(field.NewPath("spec"), "", "bad")})

	tests := []struct {
		name          string
		hosted        bool
		previous      knestv1.Phase
		deleting      bool
		paused        bool
		scope         scope
		applyErr      error
		wantPhase     knestv1.Phase
		wantReady     metav1.ConditionStatus
		wantReason    string
		wantCP        string
		wantWorkers   string
		wantEndpoint  string
		wantKubconfig bool
	}{
		{
			name: "nothing observed yet", scope: scope{},
			wantPhase: knestv1.PhaseProvisioning, wantReady: metav1.ConditionFalse, wantReason: knestv1.WaitingForInfraReason,
			wantCP: "0/1", wantWorkers: "0/2",
		},
		{
			name:      "infrastructure ready, control plane not initialized",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(false, 0, 1, ""))},
			wantPhase: knestv1.PhaseProvisioning, wantReady: metav1.ConditionFalse, wantReason: knestv1.WaitingForControlPlaneReason,
			wantCP: "0/1", wantWorkers: "0/2", wantEndpoint: "https://10.96.0.10:6443",
		},
		{
			name:      "initialized, workers joining",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(2, 1, 2))},
			previous:  knestv1.PhaseProvisioning,
			wantPhase: knestv1.PhaseProvisioning, wantReady: metav1.ConditionFalse, wantReason: knestv1.NodesNotReadyReason,
			wantCP: "1/1", wantWorkers: "1/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			// A new MachineDeployment's first machines are not up to date for a moment.
			name:      "initialized, the pool's first machines just created",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(2, 0, 0))},
			previous:  knestv1.PhaseProvisioning,
			wantPhase: knestv1.PhaseProvisioning, wantReady: metav1.ConditionFalse, wantReason: knestv1.RollingOutReason,
			wantCP: "1/1", wantWorkers: "0/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "all ready",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(2, 2, 2))},
			previous:  knestv1.PhaseProvisioning,
			wantPhase: knestv1.PhaseRunning, wantReady: metav1.ConditionTrue, wantReason: knestv1.ReadyReason,
			wantCP: "1/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "was running, a pool grows",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(2, 1, 2))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseScaling, wantReady: metav1.ConditionFalse, wantReason: knestv1.NodesNotReadyReason,
			wantCP: "1/1", wantWorkers: "1/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "control plane on an older version",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, "v1.33.1")), pools: pools(md(2, 2, 2))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseUpgrading, wantReady: metav1.ConditionFalse, wantReason: knestv1.RollingOutReason,
			wantCP: "1/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "pool rolling to a new template",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(2, 1, 1))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseUpgrading, wantReady: metav1.ConditionFalse, wantReason: knestv1.RollingOutReason,
			wantCP: "1/1", wantWorkers: "1/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "pool surging mid-rollout, all ready",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(3, 3, 1))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseUpgrading, wantReady: metav1.ConditionFalse, wantReason: knestv1.RollingOutReason,
			wantCP: "1/1", wantWorkers: "3/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "pool scaling down, more ready than desired",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(3, 3, 3))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseScaling, wantReady: metav1.ConditionFalse, wantReason: knestv1.ScalingDownReason,
			wantCP: "1/1", wantWorkers: "3/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "pool at a generation Cluster API has not observed",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(unobserved(md(2, 2, 2)))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseScaling, wantReady: metav1.ConditionFalse, wantReason: knestv1.ChangePendingReason,
			wantCP: "1/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "cached pool behind what knest just applied",
			scope:     scope{graph: rendered(3), cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion)), pools: pools(md(2, 2, 2))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseScaling, wantReady: metav1.ConditionFalse, wantReason: knestv1.ChangePendingReason,
			wantCP: "1/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name:      "control plane scaling down",
			scope:     scope{cluster: infra, controlPlane: kcpState(kcp(true, 3, 3, knestv1.DefaultVersion)), pools: pools(md(2, 2, 2))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseScaling, wantReady: metav1.ConditionFalse, wantReason: knestv1.ScalingDownReason,
			wantCP: "3/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name: "control plane at a generation Cluster API has not observed",
			scope: scope{cluster: infra, controlPlane: kcpState(func() *controlplanev1.KubeadmControlPlane {
				k := kcp(true, 1, 1, knestv1.DefaultVersion)
				k.Generation++
				return k
			}()), pools: pools(md(2, 2, 2))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseScaling, wantReady: metav1.ConditionFalse, wantReason: knestv1.ChangePendingReason,
			wantCP: "1/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name: "hosted, API servers not up yet", hosted: true,
			scope:     scope{cluster: infra, controlPlane: hcp(false, 0, 1, "")},
			wantPhase: knestv1.PhaseProvisioning, wantReady: metav1.ConditionFalse, wantReason: knestv1.WaitingForControlPlaneReason,
			wantCP: "0/1", wantWorkers: "0/2", wantEndpoint: "https://10.96.0.10:6443",
		},
		{
			name: "hosted, all ready", hosted: true,
			scope:     scope{cluster: infra, controlPlane: hcp(true, 1, 1, knestv1.DefaultVersion), pools: pools(md(2, 2, 2))},
			previous:  knestv1.PhaseProvisioning,
			wantPhase: knestv1.PhaseRunning, wantReady: metav1.ConditionTrue, wantReason: knestv1.ReadyReason,
			wantCP: "1/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name: "hosted, API servers on an older version", hosted: true,
			scope:     scope{cluster: infra, controlPlane: hcp(true, 1, 1, "v1.34.4"), pools: pools(md(2, 2, 2))},
			previous:  knestv1.PhaseRunning,
			wantPhase: knestv1.PhaseUpgrading, wantReady: metav1.ConditionFalse, wantReason: knestv1.RollingOutReason,
			wantCP: "1/1", wantWorkers: "2/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name: "hosted, kubeadm's phases failing", hosted: true,
			scope: scope{cluster: infra, controlPlane: func() *controlPlaneState {
				st := hcp(false, 1, 1, "")
				st.blocked = &metav1.Condition{Type: hcpv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: hcpv1.TenantBootstrapFailedReason, Message: "failed"}
				return st
			}()},
			wantPhase: knestv1.PhaseProvisioning, wantReady: metav1.ConditionFalse, wantReason: hcpv1.TenantBootstrapFailedReason,
			wantCP: "1/1", wantWorkers: "0/2", wantEndpoint: "https://10.96.0.10:6443",
		},
		{
			name:  "the API server refused a rendered object",
			scope: scope{graph: &cluster.Graph{}}, applyErr: invalid,
			wantPhase: knestv1.PhaseFailed, wantReady: metav1.ConditionFalse, wantReason: knestv1.ApplyFailedReason,
			wantCP: "0/1", wantWorkers: "0/2",
		},
		{
			name:  "a transient apply error is not a failure",
			scope: scope{graph: &cluster.Graph{}}, applyErr: errors.New("connection refused"),
			wantPhase: knestv1.PhaseProvisioning, wantReady: metav1.ConditionFalse, wantReason: knestv1.ApplyFailedReason,
			wantCP: "0/1", wantWorkers: "0/2",
		},
		{
			name: "paused", paused: true, scope: scope{cluster: infra, controlPlane: kcpState(kcp(true, 1, 1, knestv1.DefaultVersion))},
			wantPhase: knestv1.PhasePaused, wantReady: metav1.ConditionFalse, wantReason: knestv1.PausedReason,
			wantCP: "1/1", wantWorkers: "0/2", wantEndpoint: "https://10.96.0.10:6443", wantKubconfig: true,
		},
		{
			name: "deleting", deleting: true, scope: scope{cluster: infra},
			wantPhase: knestv1.PhaseDeleting, wantReady: metav1.ConditionFalse, wantReason: knestv1.DeletingReason,
			wantCP: "0/1", wantWorkers: "0/2", wantEndpoint: "https://10.96.0.10:6443",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}
			nc.Spec.Workers = []knestv1.WorkerPool{{Name: "workers", Replicas: ptr.To(int32(2))}}
			nc.Spec.Paused = tt.paused
			if tt.hosted {
				nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
			}
			cluster.Default(nc)
			nc.Status.Phase = tt.previous
			if tt.deleting {
				nc.DeletionTimestamp = ptr.To(metav1.Now())
			}
			s := tt.scope
			summarize(nc, &s, tt.applyErr)

			g.Expect(nc.Status.Phase).To(Equal(tt.wantPhase))
			ready := conditions.Get(nc, knestv1.ReadyCondition)
			g.Expect(ready.Status).To(Equal(tt.wantReady))
			g.Expect(ready.Reason).To(Equal(tt.wantReason))
			g.Expect(ready.Message).NotTo(BeEmpty())
			g.Expect(nc.Status.ControlPlaneReady).To(Equal(tt.wantCP))
			g.Expect(nc.Status.WorkersReady).To(Equal(tt.wantWorkers))
			g.Expect(nc.Status.Endpoint).To(Equal(tt.wantEndpoint))
			if tt.wantKubconfig {
				g.Expect(nc.Status.KubeconfigSecretName).NotTo(BeEmpty())
			} else {
				g.Expect(nc.Status.KubeconfigSecretName).To(BeEmpty())
			}
		})
	}
}

func TestSummarizeKeepsTransitionTimes(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}
	cluster.Default(nc)
	summarize(nc, &scope{}, nil)
	before := nc.Status.DeepCopy()
	summarize(nc, &scope{}, nil)
	g.Expect(nc.Status).To(Equal(*before), "an unchanged world must produce an identical status (no writes at rest)")
}

func TestSummarizeWhileDeletingSaysWhatItWaitsFor(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", DeletionTimestamp: ptr.To(metav1.Now())}}
	cluster.Default(nc)
	c := &clusterv1.Cluster{}
	c.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterDeletingCondition, Status: metav1.ConditionTrue,
		Reason: clusterv1.ClusterDeletingWaitingForWorkersDeletionReason, Message: "* MachineDeployments: demo-workers"}}
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Status.Replicas = ptr.To(int32(1))
	summarize(nc, &scope{cluster: c, controlPlane: kcpState(kcp)}, nil)

	g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).To(Equal("The cluster is being deleted; Cluster API: * MachineDeployments: demo-workers"))
	cp := conditions.Get(nc, knestv1.ControlPlaneReadyCondition)
	g.Expect(cp.Reason).To(Equal(knestv1.DeletingReason))
	g.Expect(cp.Message).NotTo(ContainSubstring("kubeadm init"))
}

// A control plane that came back blank looks healthy to Cluster API (machines and
// pods up, a version reported); only the tenant's own API can tell.
func TestSummarizeBlankControlPlane(t *testing.T) {
	ready := func() *scope {
		kcp := &controlplanev1.KubeadmControlPlane{}
		kcp.Generation, kcp.Status.ObservedGeneration = 1, 1
		kcp.Spec.Replicas, kcp.Spec.Version = ptr.To(int32(1)), knestv1.DefaultVersion
		kcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
		kcp.Status.Replicas, kcp.Status.ReadyReplicas, kcp.Status.UpToDateReplicas = ptr.To(int32(1)), ptr.To(int32(1)), ptr.To(int32(1))
		kcp.Status.Version = knestv1.DefaultVersion
		c := &clusterv1.Cluster{}
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		return &scope{cluster: c, controlPlane: kcpState(kcp)}
	}
	tests := []struct {
		name       string
		recorded   string
		tenant     *tenantState
		wantPhase  knestv1.Phase
		wantReason string
		wantState  metav1.ConditionStatus
		wantID     string
	}{
		{name: "first reading is recorded", tenant: &tenantState{id: "uid-1"},
			wantPhase: knestv1.PhaseRunning, wantReason: knestv1.ReadyReason, wantState: metav1.ConditionTrue, wantID: "uid-1"},
		{name: "same cluster", recorded: "uid-1", tenant: &tenantState{id: "uid-1"},
			wantPhase: knestv1.PhaseRunning, wantReason: knestv1.ReadyReason, wantState: metav1.ConditionTrue, wantID: "uid-1"},
		{name: "blank cluster", recorded: "uid-1", tenant: &tenantState{id: "uid-2"},
			wantPhase: knestv1.PhaseFailed, wantReason: knestv1.StateLostReason, wantState: metav1.ConditionFalse, wantID: "uid-1"},
		// A tenant API that does not answer is not a lost one (and not recorded).
		{name: "no answer", recorded: "uid-1", tenant: &tenantState{err: errors.New("i/o timeout")},
			wantPhase: knestv1.PhaseRunning, wantReason: knestv1.ReadyReason, wantState: metav1.ConditionUnknown, wantID: "uid-1"},
		{name: "no answer before the first reading", tenant: &tenantState{err: errors.New("i/o timeout")},
			wantPhase: knestv1.PhaseRunning, wantReason: knestv1.ReadyReason, wantState: metav1.ConditionUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}
			cluster.Default(nc)
			nc.Spec.Workers = nil
			nc.Status.Phase = knestv1.PhaseRunning
			nc.Status.TenantID = tt.recorded
			s := ready()
			s.nc, s.tenant = nc, tt.tenant
			if tt.tenant.err == nil && nc.Status.TenantID == "" {
				nc.Status.TenantID = tt.tenant.id // as observeTenant does
			}
			summarize(nc, s, nil)

			g.Expect(nc.Status.Phase).To(Equal(tt.wantPhase))
			g.Expect(conditions.GetReason(nc, knestv1.ReadyCondition)).To(Equal(tt.wantReason))
			g.Expect(conditions.Get(nc, knestv1.TenantStateCondition).Status).To(Equal(tt.wantState))
			g.Expect(nc.Status.TenantID).To(Equal(tt.wantID))
			if tt.wantState == metav1.ConditionFalse {
				g.Expect(conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition)).To(Equal(knestv1.StateLostReason))
				g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).To(And(ContainSubstring("uid-2"), ContainSubstring("restore")))
			}
		})
	}
}

func TestSummarizeEtcdPersistence(t *testing.T) {
	hosted := func(persistent *bool, available *metav1.Condition) *controlPlaneState {
		hcp := &hcpv1.HostedControlPlane{}
		hcp.Status.EtcdPersistent = persistent
		if available != nil {
			hcp.Status.Conditions = []metav1.Condition{*available}
		}
		return hcpState(hcp)
	}
	noClass := &metav1.Condition{Type: hcpv1.AvailableCondition, Status: metav1.ConditionFalse, Reason: hcpv1.NoStorageClassReason, Message: "etcd needs a volume"}
	tests := []struct {
		name       string
		mode       knestv1.ControlPlaneMode
		ephemeral  bool
		cp         *controlPlaneState
		wantStatus metav1.ConditionStatus // "": no condition yet
		wantReason string
		wantCP     string
	}{
		{name: "VM with an etcd disk", mode: knestv1.ControlPlaneVM,
			wantStatus: metav1.ConditionTrue, wantReason: knestv1.PersistentVolumeReason, wantCP: knestv1.WaitingForControlPlaneReason},
		{name: "VM with etcd on its root disk", mode: knestv1.ControlPlaneVM, ephemeral: true,
			wantStatus: metav1.ConditionFalse, wantReason: knestv1.EphemeralEtcdReason, wantCP: knestv1.WaitingForControlPlaneReason},
		{name: "hosted, volume not picked yet", mode: knestv1.ControlPlaneHosted, cp: hosted(nil, nil), wantCP: knestv1.WaitingForControlPlaneReason},
		{name: "hosted on a claim", mode: knestv1.ControlPlaneHosted, cp: hosted(ptr.To(true), nil),
			wantStatus: metav1.ConditionTrue, wantReason: knestv1.PersistentVolumeReason, wantCP: knestv1.WaitingForControlPlaneReason},
		{name: "hosted on an emptyDir", mode: knestv1.ControlPlaneHosted, cp: hosted(ptr.To(false), nil),
			wantStatus: metav1.ConditionFalse, wantReason: knestv1.EphemeralEtcdReason, wantCP: knestv1.WaitingForControlPlaneReason},
		{name: "hosted without a class", mode: knestv1.ControlPlaneHosted, cp: hosted(nil, noClass), wantCP: hcpv1.NoStorageClassReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}
			nc.Spec.ControlPlane.Mode = tt.mode
			nc.Spec.ControlPlane.Etcd.Ephemeral = tt.ephemeral
			cluster.Default(nc)
			summarize(nc, &scope{controlPlane: tt.cp}, nil)

			c := conditions.Get(nc, knestv1.EtcdPersistentCondition)
			if tt.wantStatus == "" {
				g.Expect(c).To(BeNil())
			} else {
				g.Expect(c).To(And(HaveField("Status", tt.wantStatus), HaveField("Reason", tt.wantReason)))
			}
			g.Expect(conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition)).To(Equal(tt.wantCP))
			g.Expect(conditions.GetReason(nc, knestv1.ReadyCondition)).NotTo(Equal(knestv1.EphemeralEtcdReason), "persistence is not readiness")
		})
	}
}

// A pool held at an older minor than the control plane gets no new machines from
// Cluster API (MachineSet preflight check KubeadmVersionSkew): the status says so
// per pool and in WorkersScalable, and a shortfall of such a pool says why.
func TestSummarizeHeldPool(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}
	nc.Spec.Version = "v1.35.4"
	nc.Spec.Workers = []knestv1.WorkerPool{
		{Name: "workers", Replicas: ptr.To(int32(1))},
		{Name: "gpu", Replicas: ptr.To(int32(2)), Version: "v1.34.4"},
		{Name: "patch", Replicas: ptr.To(int32(1)), Version: "v1.35.3"},
	}
	cluster.Default(nc)
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	s := &scope{graph: graph, pools: map[string]*clusterv1.MachineDeployment{}}
	for _, p := range graph.Pools {
		md := p.MachineDeployment.DeepCopy()
		md.Generation, md.Status.ObservedGeneration = 1, 1
		md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpToDateReplicas = ptr.To(int32(1)), ptr.To(int32(1)), ptr.To(int32(1))
		s.pools[p.Name] = md
	}
	summarize(nc, s, nil)

	c := conditions.Get(nc, knestv1.WorkersScalableCondition)
	g.Expect(c).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", knestv1.PoolVersionHeldReason)))
	g.Expect(c.Message).To(Equal("Cluster API creates no machines for pools held at an older minor than the control plane (gpu (v1.34.4)): " +
		"its MachineSet preflight check KubeadmVersionSkew joins nodes only at the control plane's minor, so they cannot scale up, " +
		"replace an unhealthy machine or roll out a changed machine shape; " +
		"upgrade them to the control plane's minor (knest upgrade demo --version v1.35.4 --release-pool POOL)"))
	g.Expect(nc.Status.Workers).To(HaveLen(3))
	g.Expect(nc.Status.Workers[0].NewMachinesBlocked).To(BeEmpty())
	g.Expect(nc.Status.Workers[1].NewMachinesBlocked).To(Equal("held at v1.34.4 under a control plane at v1.35.4: Cluster API's MachineSet preflight check KubeadmVersionSkew creates machines only at the control plane's minor"))
	g.Expect(nc.Status.Workers[2].NewMachinesBlocked).To(BeEmpty(), "an older patch of the same minor joins")
	// gpu is one machine short and will stay so: WorkersReady says why.
	g.Expect(conditions.GetReason(nc, knestv1.WorkersReadyCondition)).To(Equal(knestv1.PoolVersionHeldReason))
	g.Expect(conditions.GetMessage(nc, knestv1.WorkersReadyCondition)).To(Equal("Worker pools not ready: gpu 1/2 (Cluster API creates no machines for it: condition WorkersScalable)"))

	// Released: the pool follows spec.version and can grow again.
	nc.Spec.Workers[1].Version = ""
	graph, err = cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	s.graph = graph
	summarize(nc, s, nil)
	g.Expect(conditions.Get(nc, knestv1.WorkersScalableCondition)).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", knestv1.ScalableReason)))
	g.Expect(nc.Status.Workers[1].NewMachinesBlocked).To(BeEmpty())
}

func TestSummarizeAutoscaledPool(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "tenants"}}
	nc.Spec.Workers = []knestv1.WorkerPool{
		// Unset replicas, as the CRD no longer defaults them: 1.
		{Name: "workers"},
		{Name: "burst", Autoscaling: &knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 5}},
	}
	graph, err := cluster.Render(nc, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	s := &scope{graph: graph, pools: map[string]*clusterv1.MachineDeployment{}}
	observed := func(name string, replicas, ready int32) {
		var md *clusterv1.MachineDeployment
		for _, p := range graph.Pools {
			if p.Name == name {
				md = p.MachineDeployment.DeepCopy()
			}
		}
		md.Generation, md.Status.ObservedGeneration = 1, 1
		// What the autoscaler (or Cluster API's defaulting) wrote.
		md.Spec.Replicas = ptr.To(replicas)
		md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpToDateReplicas = ptr.To(replicas), ptr.To(ready), ptr.To(replicas)
		s.pools[name] = md
	}
	observed("workers", 1, 1)
	observed("burst", 3, 3)
	summarize(nc, s, nil)

	g.Expect(nc.Status.Workers[0].Desired).To(BeEquivalentTo(1), "unset replicas mean 1")
	g.Expect(nc.Status.Workers[0].Autoscaling).To(BeNil())
	g.Expect(nc.Status.Workers[1].Desired).To(BeEquivalentTo(3), "an autoscaled pool wants what the autoscaler set")
	g.Expect(nc.Status.Workers[1].Autoscaling).To(Equal(&knestv1.PoolAutoscaling{MinReplicas: 0, MaxReplicas: 5}))
	g.Expect(nc.Status.WorkersReady).To(Equal("4/4"))
	g.Expect(conditions.Get(nc, knestv1.WorkersReadyCondition)).To(HaveField("Status", metav1.ConditionTrue),
		"the autoscaler's replicas are no change knest waits for")

	// The autoscaler adds a node: the pool waits for it, as for any scale-up.
	observed("burst", 4, 3)
	summarize(nc, s, nil)
	g.Expect(nc.Status.Workers[1].Desired).To(BeEquivalentTo(4))
	g.Expect(conditions.GetMessage(nc, knestv1.WorkersReadyCondition)).To(Equal("Worker pools not ready: burst 3/4"))

	// Scaled to zero (min 0): an empty pool is where it should be.
	observed("burst", 0, 0)
	summarize(nc, s, nil)
	g.Expect(nc.Status.Workers[1].Desired).To(BeZero())
	g.Expect(conditions.Get(nc, knestv1.WorkersReadyCondition)).To(HaveField("Status", metav1.ConditionTrue))
}

// What Reconcile returns reaches status as an apply failure, except on the delete
// path and when only the read-back of Cluster API's status failed.
func TestApplyError(t *testing.T) {
	refused := errors.New("connection refused")
	deleting := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())}}
	for _, tt := range []struct {
		name string
		nc   *knestv1.NestedCluster
		err  error
		want error
	}{
		{"none", &knestv1.NestedCluster{}, nil, nil},
		{"a phase failed", &knestv1.NestedCluster{}, refused, refused},
		{"reading back failed", &knestv1.NestedCluster{}, &observeError{refused}, nil},
		{"deleting", deleting, refused, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := applyError(tt.nc, tt.err); got != tt.want {
				t.Errorf("applyError() = %v, want %v", got, tt.want)
			}
		})
	}
}
