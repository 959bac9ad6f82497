package cloudprovider_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/pkg/cloudprovider"
)

// A host drain evacuates a worker VM: CAPK cordons and drains its tenant Node and
// deletes the VMI, and KubeVirt starts the VM again elsewhere. The Node is
// uncordoned once the new VMI runs and its kubelet reported Ready since, not
// before; a Node a person cordoned keeps its cordon.
func TestEvacuatedNodeIsUncordonedOnceItsVMRunsAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	p := b.provider(t, g, "blue")
	b.vm(g, "blue", "w1", "worker", "host-a", "10.10.0.1")
	b.vm(g, "blue", "w2", "worker", "host-b", "10.10.0.2")
	evacuated, kept := b.node(g, "w1"), b.node(g, "w2")
	get := func(n *corev1.Node) *corev1.Node {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
		return n
	}
	cordonReady := func(n *corev1.Node, heartbeat time.Time) {
		get(n)
		n.Spec.Unschedulable = true
		g.Expect(env.Client.Update(ctx, n)).To(Succeed())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(heartbeat)}}
		g.Expect(env.Client.Status().Update(ctx, n)).To(Succeed())
	}
	sync := func() {
		g.Expect(p.UncordonEvacuated(ctx, []*corev1.Node{get(evacuated), get(kept)})).To(Succeed())
	}
	vmi := func(name string) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: b.host, Name: name}, v)).To(Succeed())
		return v
	}

	// The host drain: KubeVirt marks the VMI, CAPK cordons the Node; a person cordons
	// the other.
	old := vmi("w1")
	setVMIStatus(g, old, kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "host-a", EvacuationNodeName: "host-a"})
	cordonReady(evacuated, time.Now())
	cordonReady(kept, time.Now())
	sync()
	g.Expect(get(evacuated).Annotations).To(HaveKeyWithValue(cloudprovider.EvacuatedAnnotation, string(old.UID)))
	g.Expect(get(kept).Annotations).NotTo(HaveKey(cloudprovider.EvacuatedAnnotation))
	sync()
	g.Expect(get(evacuated).Spec.Unschedulable).To(BeTrue(), "the evacuated VMI still runs it")

	// CAPK deletes the VMI; KubeVirt starts a new one on another host node. The Node
	// still shows the old boot's Ready.
	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())
	again := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: b.host, Labels: old.Labels}, Spec: old.Spec}
	g.Eventually(func() error { return env.Client.Create(ctx, again) }, timeout, interval).Should(Succeed())
	setVMIStatus(g, again, kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "host-c"})
	g.Expect(again.UID).NotTo(Equal(old.UID))
	cordonReady(evacuated, again.CreationTimestamp.Add(-time.Minute))
	sync()
	g.Expect(get(evacuated).Spec.Unschedulable).To(BeTrue(), "its kubelet has not reported since the new VMI started")

	// The new boot's kubelet reports Ready.
	cordonReady(evacuated, again.CreationTimestamp.Add(2*time.Second))
	sync()
	g.Expect(get(evacuated).Spec.Unschedulable).To(BeFalse())
	g.Expect(get(evacuated).Annotations).NotTo(HaveKey(cloudprovider.EvacuatedAnnotation))
	g.Expect(get(kept).Spec.Unschedulable).To(BeTrue(), "a person's cordon stays")
}
