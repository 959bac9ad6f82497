package knest

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
)

func TestObjects(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"},
		Spec: knestv1.NestedClusterSpec{Workers: []knestv1.WorkerPool{{Name: "workers", Replicas: ptr.To[int32](2)}}}}
	before := nc.DeepCopy()

	objs, err := Objects(nc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(nc).To(Equal(before), "Objects must not modify its input")
	got := objs[0].(*knestv1.NestedCluster)
	g.Expect(got.Kind).To(Equal("NestedCluster"))
	g.Expect(got.Spec.Version).To(Equal(knestv1.DefaultVersion), "defaulted")

	objs, err = Objects(nc, ObjectsWithGraph(cluster.Options{}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(objs)).To(BeNumerically(">", 8))

	nc.Spec.ControlPlane.Replicas = 4
	nc.Spec.Network.PodCIDR = "nope"
	_, err = Objects(nc)
	g.Expect(IsInvalid(err)).To(BeTrue())
	g.Expect(err.Error()).To(And(
		HavePrefix("invalid cluster demo:\n  - "),
		ContainSubstring("spec.controlPlane.replicas"),
		ContainSubstring("spec.network.podCIDR")))
}

func TestDescribeBlocking(t *testing.T) {
	g := NewWithT(t)
	nc := &knestv1.NestedCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Generation: 1},
		Spec: knestv1.NestedClusterSpec{ControlPlane: knestv1.ControlPlaneSpec{Replicas: 1}}}
	g.Expect(describeBlocking(nc, nil)).To(ContainSubstring("is the controller running"))

	nc.Status = knestv1.NestedClusterStatus{ObservedGeneration: 1, Phase: knestv1.PhaseProvisioning, Conditions: []metav1.Condition{
		{Type: knestv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: knestv1.WaitingForControlPlaneReason, Message: "summary"},
		{Type: knestv1.ControlPlaneReadyCondition, Status: metav1.ConditionFalse, Reason: knestv1.WaitingForInfraReason, Message: "0 of 1 machines ready"},
	}}
	g.Expect(describeBlocking(nc, nil)).To(Equal("condition ControlPlaneReady is False, reason WaitingForInfrastructure: 0 of 1 machines ready; " +
		"waiting for control plane 0/1 ready, condition Ready is not True; phase Provisioning"))
}
