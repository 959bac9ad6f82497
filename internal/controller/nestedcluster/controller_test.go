package nestedcluster_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/internal/controller/nestedcluster"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
	csicontroller "github.com/knest-dev/knest/pkg/csi/controller"
)

// waitForGraph waits until every object the NestedCluster's current spec renders to
// exists, controlled by the NestedCluster, and returns the rendered graph.
func waitForGraph(g Gomega, nc *knestv1.NestedCluster) *cluster.Graph {
	var graph *cluster.Graph
	g.Eventually(func(g Gomega) {
		current := nc.DeepCopy()
		env.Get(g, current)
		var err error
		graph, err = cluster.Render(current, cluster.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, want := range graph.Objects() {
			got := want.DeepCopyObject().(client.Object)
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(want), got)).To(Succeed(), "%T %s", want, want.GetName())
			if nestedcluster.ControlledByCluster(want) {
				// Cluster API's Cluster controller takes these over; knest only co-owns them.
				g.Expect(got.GetOwnerReferences()).To(ContainElement(And(
					HaveField("UID", current.UID), HaveField("Controller", BeNil()))), "%T %s", want, want.GetName())
				continue
			}
			g.Expect(metav1.IsControlledBy(got, current)).To(BeTrue(), "%T %s is not controlled by the NestedCluster", want, want.GetName())
		}
	}, timeout, interval).Should(Succeed())
	return graph
}

func update(g Gomega, nc *knestv1.NestedCluster, mutate func(*knestv1.NestedCluster)) {
	g.Eventually(func() error {
		env.Get(g, nc)
		mutate(nc)
		return env.Client.Update(context.Background(), nc)
	}, timeout, interval).Should(Succeed())
}

func TestCreateAppliesAGraphTheRealSchemasAccept(t *testing.T) {
	g := NewWithT(t)
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "demo")
	nc.Spec.ControlPlane.KernelBoot = &knestv1.KernelBootSpec{Image: "knest/node-kernel:v1.34.3", KernelArgs: "console=ttyS0"}
	nc.Spec.APIServer = knestv1.APIServerSpec{ServiceType: knestv1.ServiceTypeLoadBalancer, CertSANs: []string{"api.tenant.example"}}
	nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{
		Name:     "gpu",
		Replicas: ptr.To(int32(0)),
		MachineSpec: knestv1.MachineSpec{RootDisk: knestv1.RootDiskSpec{
			Type: knestv1.RootDiskDataVolume, Size: ptr.To(resource.MustParse("30Gi")),
		}},
		Labels:      map[string]knestv1.LabelValue{"accelerator": "a10"},
		Taints:      []knestv1.Taint{{Key: "gpu", Value: "true", Effect: "NoSchedule"}},
		GPUs:        []knestv1.DeviceSpec{{Name: "gpu0", DeviceName: "nvidia.com/GA102GL_A10"}},
		HostDevices: []knestv1.DeviceSpec{{Name: "nic0", DeviceName: "intel.com/e810"}},
	})
	g.Expect(env.Client.Create(context.Background(), nc)).To(Succeed())

	graph := waitForGraph(g, nc)
	g.Expect(graph.Objects()).To(HaveLen(26))

	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(controllerutil.ContainsFinalizer(nc, knestv1.Finalizer)).To(BeTrue())
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation), "status: %+v", nc.Status)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseProvisioning))
		g.Expect(nc.Status.ControlPlaneReady).To(Equal("0/1"))
		g.Expect(nc.Status.WorkersReady).To(Equal("0/1"))
		g.Expect(conditions.IsTrue(nc, knestv1.TopologyReconciledCondition)).To(BeTrue())
		g.Expect(conditions.GetReason(nc, knestv1.ReadyCondition)).To(Equal(knestv1.WaitingForInfraReason))
	}, timeout, interval).Should(Succeed())
}

func TestScaleChangesPropagate(t *testing.T) {
	g := NewWithT(t)
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "scale")
	g.Expect(env.Client.Create(context.Background(), nc)).To(Succeed())
	graph := waitForGraph(g, nc)

	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.ControlPlane.Replicas = 3
		nc.Spec.Workers[0].Replicas = ptr.To(int32(4))
	})
	kcp := graph.ControlPlane.DeepCopy()
	md := graph.Pools[0].MachineDeployment.DeepCopy()
	g.Eventually(func(g Gomega) {
		env.Get(g, kcp)
		env.Get(g, md)
		g.Expect(*kcp.Spec.Replicas).To(BeEquivalentTo(3))
		g.Expect(*md.Spec.Replicas).To(BeEquivalentTo(4))
	}, timeout, interval).Should(Succeed())
	g.Expect(md.Spec.Template.Spec.InfrastructureRef.Name).To(Equal(graph.Pools[0].MachineTemplate.Name), "scaling must not roll the pool")

	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Replicas = ptr.To(int32(0)) })
	g.Eventually(func(g Gomega) {
		env.Get(g, md)
		g.Expect(*md.Spec.Replicas).To(BeZero())
	}, timeout, interval).Should(Succeed())
}

func TestPauseHoldsChangesUntilUnpaused(t *testing.T) {
	g := NewWithT(t)
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "pause")
	g.Expect(env.Client.Create(context.Background(), nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	c := graph.Cluster.DeepCopy()
	md := graph.Pools[0].MachineDeployment.DeepCopy()
	env.Get(g, md)
	replicas := *md.Spec.Replicas

	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Paused = true
		nc.Spec.Workers[0].Replicas = ptr.To(int32(5))
	})
	// Cluster API is told (it then leaves every machine of the Cluster alone) ...
	g.Eventually(func(g Gomega) {
		env.Get(g, c)
		g.Expect(ptr.Deref(c.Spec.Paused, false)).To(BeTrue())
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhasePaused))
	}, timeout, interval).Should(Succeed())
	// ... and knest holds the spec change back.
	g.Consistently(func(g Gomega) {
		env.Get(g, md)
		g.Expect(*md.Spec.Replicas).To(Equal(replicas))
	}, 2*time.Second, interval).Should(Succeed())

	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Paused = false })
	g.Eventually(func(g Gomega) {
		env.Get(g, c)
		env.Get(g, md)
		g.Expect(ptr.Deref(c.Spec.Paused, false)).To(BeFalse())
		g.Expect(*md.Spec.Replicas).To(BeEquivalentTo(5))
	}, timeout, interval).Should(Succeed())
}

func TestSpecChangeRollsTemplatesAndPrunesUnusedOnes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "roll")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	first := waitForGraph(g, nc).Pools[0]

	// A MachineSet still uses the first template, as Cluster API's would during a rollout.
	ms := &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "roll-workers-old", Namespace: nc.Namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: nc.Name}},
		Spec: clusterv1.MachineSetSpec{
			ClusterName: nc.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"old": "true"}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"old": "true"}},
				Spec:       first.MachineDeployment.Spec.Template.Spec,
			},
		},
	}
	g.Expect(env.Client.Create(ctx, ms)).To(Succeed())

	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Memory = ptr.To(resource.MustParse("6Gi")) })
	second := waitForGraph(g, nc).Pools[0]
	g.Expect(second.MachineTemplate.Name).NotTo(Equal(first.MachineTemplate.Name))
	g.Expect(second.BootstrapTemplate.Name).To(Equal(first.BootstrapTemplate.Name), "the kubeadm config did not change")
	md := second.MachineDeployment.DeepCopy()
	env.Get(g, md)
	g.Expect(md.Spec.Template.Spec.InfrastructureRef.Name).To(Equal(second.MachineTemplate.Name))

	old := first.MachineTemplate.DeepCopy()
	g.Consistently(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(old), old) }, 2*time.Second, interval).
		Should(Succeed(), "a template a MachineSet uses must stay")

	// The rollout finishes: the old MachineSet goes and the deployment's status moves.
	g.Expect(env.Client.Delete(ctx, ms)).To(Succeed())
	md.Status.ReadyReplicas = ptr.To(int32(1))
	g.Expect(env.Client.Status().Update(ctx, md)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(old), old))
	}, timeout, interval).Should(BeTrue(), "an unused old template must be pruned")
}

func TestRemovedPoolIsDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "pools")
	nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "gpu", Replicas: ptr.To(int32(2))})
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	gpu := waitForGraph(g, nc).Pools[1]
	g.Expect(gpu.Name).To(Equal("gpu"))

	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Workers = nc.Spec.Workers[:1] })
	for _, obj := range []client.Object{gpu.MachineDeployment, gpu.HealthCheck, gpu.MachineTemplate, gpu.BootstrapTemplate} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
		}, timeout, interval).Should(BeTrue(), "%T %s", obj, obj.GetName())
	}
	waitForGraph(g, nc)
	g.Eventually(func() []string { return eventMessages(g, nc, "Pruned") }, timeout, interval).Should(
		ContainElement("Deleted MachineDeployment " + gpu.MachineDeployment.Name + ": the spec no longer asks for it"))
}

// eventMessages lists the messages of the events about nc with reason.
func eventMessages(g Gomega, nc *knestv1.NestedCluster, reason string) []string {
	events := &corev1.EventList{}
	g.Expect(env.Client.List(context.Background(), events, client.InNamespace(nc.Namespace))).To(Succeed())
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == nc.Name && e.InvolvedObject.Kind == "NestedCluster" && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// simulateClusterAPI writes the status Cluster API and CAPK would write once the
// tenant's control plane and every worker are up.
func simulateClusterAPI(g Gomega, graph *cluster.Graph, workersReady int32) {
	ctx := context.Background()
	c := graph.Cluster.DeepCopy()
	g.Eventually(func(g Gomega) {
		env.Get(g, c)
		c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.96.12.34", Port: 6443}
		g.Expect(env.Client.Update(ctx, c)).To(Succeed())
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		g.Expect(env.Client.Status().Update(ctx, c)).To(Succeed())

		if graph.HostedControlPlane != nil {
			simulateHostedControlPlane(g, graph, nil)
		} else {
			kcp := graph.ControlPlane.DeepCopy()
			env.Get(g, kcp)
			kcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
			kcp.Status.Replicas, kcp.Status.ReadyReplicas = kcp.Spec.Replicas, kcp.Spec.Replicas
			kcp.Status.Version = kcp.Spec.Version
			kcp.Status.UpToDateReplicas = kcp.Spec.Replicas
			kcp.Status.ObservedGeneration = kcp.Generation
			g.Expect(env.Client.Status().Update(ctx, kcp)).To(Succeed())
		}

		for _, p := range graph.Pools {
			md := p.MachineDeployment.DeepCopy()
			env.Get(g, md)
			md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpToDateReplicas = &workersReady, &workersReady, &workersReady
			md.Status.ObservedGeneration = md.Generation
			g.Expect(env.Client.Status().Update(ctx, md)).To(Succeed())
		}
	}, timeout, interval).Should(Succeed())
}

// simulateHostedControlPlane writes the status knest's HostedControlPlane controller
// writes once its API servers are up at the spec's version and kubeadm's phases ran
// in the tenant, with etcd on a claim; mutate (optional) changes it from there.
func simulateHostedControlPlane(g Gomega, graph *cluster.Graph, mutate func(*hcpv1.HostedControlPlane)) {
	hcp := graph.HostedControlPlane.DeepCopy()
	g.Eventually(func(g Gomega) {
		env.Get(g, hcp)
		hcp.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
		hcp.Status.Replicas, hcp.Status.ReadyReplicas = hcp.Spec.Replicas, hcp.Spec.Replicas
		hcp.Status.AvailableReplicas, hcp.Status.UpToDateReplicas = hcp.Spec.Replicas, hcp.Spec.Replicas
		hcp.Status.Version = hcp.Spec.Version
		hcp.Status.EtcdPersistent = ptr.To(true)
		hcp.Status.ObservedGeneration = hcp.Generation
		conditions.Set(hcp, metav1.Condition{Type: hcpv1.AvailableCondition, Status: metav1.ConditionTrue, Reason: hcpv1.AvailableReason})
		if mutate != nil {
			mutate(hcp)
		}
		g.Expect(env.Client.Status().Update(context.Background(), hcp)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// hostedMode puts nc's control plane in pods on the host.
func hostedMode(nc *knestv1.NestedCluster) *knestv1.NestedCluster {
	nc.Spec.ControlPlane.Mode = knestv1.ControlPlaneHosted
	return nc
}

func TestHostedCreateAppliesAHostedControlPlane(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := hostedMode(testenv.NestedCluster(namespace(t), "hosted"))
	nc.Spec.ControlPlane.Replicas = 3
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())

	graph := waitForGraph(g, nc)
	g.Expect(graph.HostedControlPlane).NotTo(BeNil())
	g.Expect(graph.ControlPlane).To(BeNil())
	g.Expect(graph.ControlPlaneTemplate).To(BeNil())
	g.Expect(graph.ControlPlaneHealthCheck).To(BeNil())
	hcp := graph.HostedControlPlane.DeepCopy()
	env.Get(g, hcp)
	g.Expect(hcp.Spec.Version).To(Equal(knestv1.DefaultVersion))
	g.Expect(hcp.Spec.Replicas).To(Equal(ptr.To(int32(3))))
	c := graph.Cluster.DeepCopy()
	env.Get(g, c)
	g.Expect(c.Spec.ControlPlaneRef.Kind).To(Equal("HostedControlPlane"))

	// No VM control plane: no KubeadmControlPlane, no control-plane VM template or health check.
	cpName := cluster.ControlPlaneName(nc.Name)
	for _, obj := range []client.Object{&controlplanev1.KubeadmControlPlane{}, &capkv1.KubevirtMachineTemplate{}, &clusterv1.MachineHealthCheck{}} {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: nc.Namespace, Name: cpName}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: %v", obj, cpName, err)
	}

	// The KubevirtCluster is externally managed: knest marks it ready for CAPK.
	kc := graph.KubevirtCluster.DeepCopy()
	g.Eventually(func(g Gomega) {
		env.Get(g, kc)
		g.Expect(kc.Status.Ready).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseProvisioning))
		g.Expect(nc.Status.ControlPlaneReady).To(Equal("0/3"))
		g.Expect(conditions.IsTrue(nc, knestv1.TopologyReconciledCondition)).To(BeTrue())
		g.Expect(conditions.Get(nc, knestv1.ControlPlaneReadyCondition)).To(And(
			HaveField("Reason", knestv1.WaitingForControlPlaneReason),
			HaveField("Message", "Waiting for the hosted API server and kubeadm's phases in the tenant (0/3 ready)")))
		g.Expect(conditions.Get(nc, knestv1.EtcdPersistentCondition)).To(BeNil(), "the HostedControlPlane has not picked a volume yet")
	}, timeout, interval).Should(Succeed())
}

func TestHostedStatusSummarizesTheHostedControlPlane(t *testing.T) {
	g := NewWithT(t)
	startController(t)
	nc := hostedMode(testenv.NestedCluster(namespace(t), "hstatus"))
	g.Expect(env.Client.Create(context.Background(), nc)).To(Succeed())
	graph := waitForGraph(g, nc)

	simulateClusterAPI(g, graph, 1)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
		g.Expect(conditions.IsTrue(nc, knestv1.ReadyCondition)).To(BeTrue(), "%+v", nc.Status.Conditions)
		g.Expect(nc.Status.Version).To(Equal(knestv1.DefaultVersion))
		g.Expect(nc.Status.ControlPlane).To(Equal(knestv1.ReplicaStatus{Desired: 1, Ready: 1, Current: 1, UpToDate: 1}))
		g.Expect(nc.Status.KubeconfigSecretName).To(Equal("hstatus-kubeconfig"))
		g.Expect(conditions.Get(nc, knestv1.EtcdPersistentCondition)).To(HaveField("Reason", knestv1.PersistentVolumeReason))
	}, timeout, interval).Should(Succeed())

	// A hosted control plane that cannot go on by itself says why, and Ready follows.
	simulateHostedControlPlane(g, graph, func(hcp *hcpv1.HostedControlPlane) {
		conditions.Set(hcp, metav1.Condition{Type: hcpv1.AvailableCondition, Status: metav1.ConditionFalse,
			Reason: hcpv1.TenantBootstrapFailedReason, Message: "kubeadm's phases failed 3 times"})
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Get(nc, knestv1.ControlPlaneReadyCondition)).To(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", hcpv1.TenantBootstrapFailedReason),
			HaveField("Message", "kubeadm's phases failed 3 times")))
		g.Expect(conditions.GetReason(nc, knestv1.ReadyCondition)).To(Equal(hcpv1.TenantBootstrapFailedReason))
	}, timeout, interval).Should(Succeed())
	simulateHostedControlPlane(g, graph, nil)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.IsTrue(nc, knestv1.ControlPlaneReadyCondition)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	// Scaling the API servers: pending until the HostedControlPlane's controller has
	// observed it, then scaling up until they are ready.
	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.ControlPlane.Replicas = 3 })
	hcp := graph.HostedControlPlane.DeepCopy()
	g.Eventually(func(g Gomega) {
		env.Get(g, hcp)
		g.Expect(hcp.Spec.Replicas).To(Equal(ptr.To(int32(3))))
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition)).To(Equal(knestv1.ChangePendingReason))
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseScaling))
	}, timeout, interval).Should(Succeed())
	simulateHostedControlPlane(g, graph, func(hcp *hcpv1.HostedControlPlane) {
		hcp.Status.Replicas, hcp.Status.ReadyReplicas, hcp.Status.UpToDateReplicas = ptr.To(int32(3)), ptr.To(int32(1)), ptr.To(int32(3))
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(conditions.Get(nc, knestv1.ControlPlaneReadyCondition)).To(And(
			HaveField("Reason", knestv1.ScalingUpReason), HaveField("Message", "1 of 3 control-plane nodes ready")))
		g.Expect(nc.Status.ControlPlaneReady).To(Equal("1/3"))
	}, timeout, interval).Should(Succeed())
	simulateHostedControlPlane(g, graph, nil)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
		g.Expect(nc.Status.ControlPlaneReady).To(Equal("3/3"))
	}, timeout, interval).Should(Succeed())

	// An upgrade: the HostedControlPlane gets the version and rolls its pods.
	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.36.0" })
	g.Eventually(func(g Gomega) {
		env.Get(g, hcp)
		g.Expect(hcp.Spec.Version).To(Equal("v1.36.0"))
	}, timeout, interval).Should(Succeed())
	simulateHostedControlPlane(g, graph, func(hcp *hcpv1.HostedControlPlane) { hcp.Status.Version = knestv1.DefaultVersion })
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(conditions.Get(nc, knestv1.ControlPlaneReadyCondition)).To(And(
			HaveField("Reason", knestv1.RollingOutReason),
			HaveField("Message", "Upgrading the control plane from "+knestv1.DefaultVersion+" to v1.36.0")))
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseUpgrading))
	}, timeout, interval).Should(Succeed())
}

func TestStatusSummarizesClusterAPI(t *testing.T) {
	g := NewWithT(t)
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "status")
	g.Expect(env.Client.Create(context.Background(), nc)).To(Succeed())
	graph := waitForGraph(g, nc)

	simulateClusterAPI(g, graph, 0)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseProvisioning))
		g.Expect(nc.Status.ControlPlaneReady).To(Equal("1/1"))
		g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).To(Equal("Worker pools not ready: workers 0/1"))
	}, timeout, interval).Should(Succeed())

	simulateClusterAPI(g, graph, 1)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
		g.Expect(conditions.IsTrue(nc, knestv1.ReadyCondition)).To(BeTrue())
		g.Expect(nc.Status.Endpoint).To(Equal("https://10.96.12.34:6443"))
		g.Expect(nc.Status.KubeconfigSecretName).To(Equal("status-kubeconfig"))
		g.Expect(nc.Status.Version).To(Equal(knestv1.DefaultVersion))
		g.Expect(nc.Status.ControlPlane).To(Equal(knestv1.ReplicaStatus{Desired: 1, Ready: 1, Current: 1, UpToDate: 1}))
		g.Expect(nc.Status.Workers).To(Equal([]knestv1.PoolStatus{{Name: "workers", Version: knestv1.DefaultVersion,
			ReplicaStatus: knestv1.ReplicaStatus{Desired: 1, Ready: 1, Current: 1, UpToDate: 1}}}))
	}, timeout, interval).Should(Succeed())

	// Growing the pool makes it Scaling, not Provisioning again.
	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Workers[0].Replicas = ptr.To(int32(2)) })
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseScaling))
		g.Expect(nc.Status.WorkersReady).To(Equal("1/2"))
	}, timeout, interval).Should(Succeed())
}

func TestDeleteWaitsForClusterAPIAndLeavesNothing(t *testing.T) {
	startController(t)
	t.Run("VM control plane", func(t *testing.T) { testDeleteWaitsForClusterAPI(t, knestv1.ControlPlaneVM) })
	t.Run("hosted control plane", func(t *testing.T) { testDeleteWaitsForClusterAPI(t, knestv1.ControlPlaneHosted) })
}

func testDeleteWaitsForClusterAPI(t *testing.T, mode knestv1.ControlPlaneMode) {
	g := NewWithT(t)
	ctx := context.Background()
	nc := testenv.NestedCluster(namespace(t), "gone")
	nc.Spec.ControlPlane.Mode = mode
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	g.Expect(graph.HostedControlPlane != nil).To(Equal(mode == knestv1.ControlPlaneHosted))

	// Cluster API holds a Cluster with its finalizer until every machine is gone.
	const capiFinalizer = "test.knest.dev/machines-still-exist"
	c := graph.Cluster.DeepCopy()
	g.Eventually(func() error {
		env.Get(g, c)
		controllerutil.AddFinalizer(c, capiFinalizer)
		return env.Client.Update(ctx, c)
	}, timeout, interval).Should(Succeed())

	// A load balancer the tenant's cloud controller manager made: no one else
	// deletes it once the tenant is gone.
	loadBalancer := hostLoadBalancer(g, nc.Namespace, nc.Name, "a1")
	// And a host claim its CSI driver made for a tenant volume.
	volume := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-0123", Namespace: nc.Namespace, Labels: map[string]string{csicontroller.ClusterLabel: nc.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	g.Expect(env.Client.Create(ctx, volume)).To(Succeed())

	g.Expect(env.Client.Delete(ctx, nc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, c)
		g.Expect(c.DeletionTimestamp.IsZero()).To(BeFalse(), "the controller deletes the Cluster")
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseDeleting))
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition)).To(Equal(knestv1.DeletingReason))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc) }, 2*time.Second, interval).
		Should(Succeed(), "the NestedCluster stays while the Cluster exists")

	g.Eventually(func() error {
		env.Get(g, c)
		controllerutil.RemoveFinalizer(c, capiFinalizer)
		return env.Client.Update(ctx, c)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc))
	}, timeout, interval).Should(BeTrue())

	// Everything else goes with the garbage collector (kube-controller-manager).
	for _, obj := range append(graph.Objects(), append(loadBalancer, volume)...) {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
		}, time.Minute, interval).Should(BeTrue(), "%T %s", obj, obj.GetName())
	}
}

func TestRestartMidCreateMakesNoDuplicates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stop := startController(t)
	nc := testenv.NestedCluster(namespace(t), "restart")
	nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "b"}, knestv1.WorkerPool{Name: "c"})
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: nc.Namespace, Name: nc.Name}, &clusterv1.Cluster{})
	}, timeout, 10*time.Millisecond).Should(Succeed())
	stop()

	startController(t)
	graph := waitForGraph(g, nc)
	labels := client.MatchingLabels{knestv1.ClusterNameLabel: nc.Name}
	for list, want := range map[client.ObjectList]int{
		&clusterv1.ClusterList{}:                  1,
		&capkv1.KubevirtClusterList{}:             1,
		&controlplanev1.KubeadmControlPlaneList{}: 1,
		&capkv1.KubevirtMachineTemplateList{}:     4,
		&bootstrapv1.KubeadmConfigTemplateList{}:  3,
		&clusterv1.MachineDeploymentList{}:        3,
		&clusterv1.MachineHealthCheckList{}:       4,
		&addonsv1.ClusterResourceSetList{}:        2, // CNI and CSI
	} {
		g.Expect(env.Client.List(ctx, list, client.InNamespace(nc.Namespace), labels)).To(Succeed())
		g.Expect(meta.LenList(list)).To(Equal(want), "%T", list)
	}
	g.Expect(graph.Pools).To(HaveLen(3))
}

func TestNoWritesAtRest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stop := startController(t)
	nc := testenv.NestedCluster(namespace(t), "rest")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	simulateClusterAPI(g, graph, 1)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
	}, timeout, interval).Should(Succeed())

	versions := func() map[string]string {
		out := map[string]string{}
		for _, obj := range graph.Objects() {
			cur := obj.DeepCopyObject().(client.Object)
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur)).To(Succeed())
			out[cur.GetObjectKind().GroupVersionKind().Kind+"/"+cur.GetName()] = cur.GetResourceVersion()
		}
		return out
	}
	time.Sleep(time.Second) // let the last reconciles settle
	before := versions()

	// A fresh controller reconciles everything from scratch; an unrelated metadata
	// change on the NestedCluster reconciles it once more.
	stop()
	startController(t)
	update(g, nc, func(nc *knestv1.NestedCluster) { metav1.SetMetaDataAnnotation(&nc.ObjectMeta, "touched", "yes") })
	env.Get(g, nc)
	ncVersion := nc.ResourceVersion
	time.Sleep(3 * time.Second)

	g.Expect(versions()).To(Equal(before), "no Cluster API object may be rewritten when nothing changed")
	env.Get(g, nc)
	g.Expect(nc.ResourceVersion).To(Equal(ncVersion), "the NestedCluster's status must not be rewritten when nothing changed")
}

func TestRefusesToTakeOverAnObjectItDoesNotOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	ns := namespace(t)
	theirs := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster.IsolationName("taken"), Labels: map[string]string{"owner": "someone-else"}},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())
	nc := testenv.NestedCluster(ns, "taken")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())

	// Failed, for this generation (so a waiting CLI stops), naming the object.
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseFailed))
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(conditions.GetReason(nc, knestv1.ReadyCondition)).To(Equal(knestv1.ApplyFailedReason))
		g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).To(ContainSubstring(
			"NetworkPolicy taken-isolation already exists and does not belong to NestedCluster taken"))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() []string { return eventMessages(g, nc, knestv1.ApplyFailedReason) }, timeout, interval).Should(
		ContainElement(ContainSubstring("NetworkPolicy taken-isolation already exists")))
	// Theirs is untouched and nothing else was created.
	after := theirs.DeepCopy()
	env.Get(g, after)
	g.Expect(after.ResourceVersion).To(Equal(theirs.ResourceVersion))
	g.Expect(after.OwnerReferences).To(BeEmpty())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, &clusterv1.Cluster{})).To(Satisfy(apierrors.IsNotFound))

	// Once it is out of the way, the cluster is built.
	g.Expect(env.Client.Delete(ctx, theirs)).To(Succeed())
	update(g, nc, func(nc *knestv1.NestedCluster) { metav1.SetMetaDataAnnotation(&nc.ObjectMeta, "retry", "1") })
	waitForGraph(g, nc)
}

// CAPK fills in the KubevirtCluster's endpoint from its Service; a later apply by
// knest must leave it alone, not reset it to the empty value knest never meant to own.
func TestApplyLeavesTheEndpointCAPKWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "endpoint")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)

	kc := graph.KubevirtCluster.DeepCopy()
	env.Get(g, kc)
	kc.Spec.ControlPlaneEndpoint = capkv1.APIEndpoint{Host: "endpoint-lb.example.svc", Port: 6443}
	g.Expect(env.Client.Update(ctx, kc, client.FieldOwner("capk"))).To(Succeed())

	// As a knest release that renders the KubevirtCluster differently would: apply it again.
	env.Get(g, kc)
	delete(kc.Annotations, "knest.dev/applied-hash")
	g.Expect(env.Client.Update(ctx, kc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env.Get(g, kc)
		g.Expect(kc.Annotations).To(HaveKey("knest.dev/applied-hash"))
	}, timeout, interval).Should(Succeed())
	g.Expect(kc.Spec.ControlPlaneEndpoint).To(Equal(capkv1.APIEndpoint{Host: "endpoint-lb.example.svc", Port: 6443}))
}

func TestVersionChangeWaitsForTheRolloutBefore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "upgrade")
	nc.Spec.Version = "v1.32.4"
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	graph := waitForGraph(g, nc)
	simulateClusterAPI(g, graph, 1)
	kcp := graph.ControlPlane.DeepCopy()
	md := graph.Pools[0].MachineDeployment.DeepCopy()
	// Running first: only a cluster that was ready once is Upgrading, not Provisioning.
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
	}, timeout, interval).Should(Succeed())

	// v1.33: Cluster API gets it and starts rolling (status still at v1.32).
	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Version = "v1.33.7" })
	g.Eventually(func(g Gomega) {
		env.Get(g, kcp)
		g.Expect(kcp.Spec.Version).To(Equal("v1.33.7"))
	}, timeout, interval).Should(Succeed())

	// v1.34 while that rolls: held, with the reason, and other changes still go through.
	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.34.3"
		nc.Spec.Workers[0].Replicas = ptr.To(int32(3))
	})
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		env.Get(g, md)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(conditions.GetReason(nc, knestv1.TopologyReconciledCondition)).To(Equal(knestv1.UpgradeHeldReason))
		g.Expect(conditions.GetMessage(nc, knestv1.ReadyCondition)).To(Equal("spec.version v1.34.3 waits until every machine has rolled out to v1.33.7; upgrades do not stack"))
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseUpgrading))
		g.Expect(*md.Spec.Replicas).To(BeEquivalentTo(3))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		env.Get(g, kcp)
		env.Get(g, md)
		g.Expect(kcp.Spec.Version).To(Equal("v1.33.7"))
		g.Expect(md.Spec.Template.Spec.Version).To(Equal("v1.33.7"))
	}, 2*time.Second, interval).Should(Succeed())

	// The rollout to v1.33 ends: v1.34 goes out.
	simulateClusterAPI(g, graph, 3)
	g.Eventually(func(g Gomega) {
		env.Get(g, kcp)
		g.Expect(kcp.Spec.Version).To(Equal("v1.34.3"))
		env.Get(g, nc)
		g.Expect(conditions.GetReason(nc, knestv1.TopologyReconciledCondition)).To(Equal(knestv1.ReconciledReason))
	}, timeout, interval).Should(Succeed())
}

// TestHeldPoolIsReportedUntilItCatchesUp: a pool held at an older minor than the
// control plane gets no new machines from Cluster API (MachineSet preflight check
// KubeadmVersionSkew); the NestedCluster says so while it is held, and no longer
// once the pool has caught up.
func TestHeldPoolIsReportedUntilItCatchesUp(t *testing.T) {
	g := NewWithT(t)
	startController(t)
	nc := testenv.NestedCluster(namespace(t), "held")
	nc.Spec.Version = "v1.34.4"
	nc.Spec.Workers = append(nc.Spec.Workers, knestv1.WorkerPool{Name: "gpu", Replicas: ptr.To(int32(1))})
	g.Expect(env.Client.Create(context.Background(), nc)).To(Succeed())
	simulateClusterAPI(g, waitForGraph(g, nc), 1)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.Phase).To(Equal(knestv1.PhaseRunning))
		g.Expect(conditions.GetReason(nc, knestv1.WorkersScalableCondition)).To(Equal(knestv1.ScalableReason))
	}, timeout, interval).Should(Succeed())

	update(g, nc, func(nc *knestv1.NestedCluster) {
		nc.Spec.Version = "v1.35.4"
		nc.Spec.Workers[1].Version = "v1.34.4"
	})
	simulateClusterAPI(g, waitForGraph(g, nc), 1)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		c := conditions.Get(nc, knestv1.WorkersScalableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(knestv1.PoolVersionHeldReason))
		g.Expect(c.Message).To(And(ContainSubstring("(gpu (v1.34.4))"), ContainSubstring("KubeadmVersionSkew"),
			ContainSubstring("knest upgrade held --version v1.35.4 --release-pool POOL")))
		g.Expect(nc.Status.Workers).To(ConsistOf(
			HaveField("NewMachinesBlocked", BeEmpty()),
			And(HaveField("Name", "gpu"), HaveField("Version", "v1.34.4"), HaveField("NewMachinesBlocked", ContainSubstring("held at v1.34.4 under a control plane at v1.35.4"))),
		))
		g.Expect(conditions.IsTrue(nc, knestv1.ReadyCondition)).To(BeTrue(), "the pool's nodes run: it is not unready")
	}, timeout, interval).Should(Succeed())

	// The pool catches up.
	update(g, nc, func(nc *knestv1.NestedCluster) { nc.Spec.Workers[1].Version = "" })
	simulateClusterAPI(g, waitForGraph(g, nc), 1)
	g.Eventually(func(g Gomega) {
		env.Get(g, nc)
		g.Expect(nc.Status.ObservedGeneration).To(Equal(nc.Generation))
		g.Expect(conditions.Get(nc, knestv1.WorkersScalableCondition)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", knestv1.ScalableReason), HaveField("Message", "")))
		g.Expect(nc.Status.Workers).To(HaveEach(HaveField("NewMachinesBlocked", BeEmpty())))
	}, timeout, interval).Should(Succeed())
}
