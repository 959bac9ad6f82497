package cloudprovider_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8scloud "k8s.io/cloud-provider"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestInstancesAnswerFromTheHostVMs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := newBed(t, g)
	inst, ok := b.provider(t, g, "blue").InstancesV2()
	g.Expect(ok).To(BeTrue())

	b.vm(g, "blue", "running", "worker", "host-a", "10.10.0.1")
	b.vm(g, "blue", "stopped", "worker", "", "")
	b.vm(g, "blue", "ended", "worker", "host-a", "10.10.0.3")
	ended := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "ended", Namespace: b.host}}
	setVMIStatus(g, ended, kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Succeeded})
	b.vm(g, "green", "others", "worker", "host-a", "10.10.1.1")

	node := func(name, providerID string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	}
	tests := []struct {
		name           string
		node           *corev1.Node
		vm             string
		exists, isDown bool
		addresses      []corev1.NodeAddress
	}{
		{name: "running, by provider ID", node: node("n1", "kubevirt://running"), vm: "running", exists: true,
			addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.10.0.1"}, {Type: corev1.NodeHostName, Address: "n1"}}},
		{name: "running, by name before it has a provider ID", node: node("running", ""), vm: "running", exists: true,
			addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.10.0.1"}, {Type: corev1.NodeHostName, Address: "running"}}},
		{name: "stopped: no VMI", node: node("stopped", "kubevirt://stopped"), vm: "stopped", exists: true, isDown: true,
			addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "stopped"}}},
		{name: "VMI ended", node: node("ended", "kubevirt://ended"), vm: "ended", exists: true, isDown: true,
			addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "ended"}}},
		{name: "VM gone", node: node("gone", "kubevirt://gone")},
		{name: "another cluster's VM", node: node("others", "kubevirt://others")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			exists, err := inst.InstanceExists(ctx, tt.node)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(exists).To(Equal(tt.exists))
			down, err := inst.InstanceShutdown(ctx, tt.node)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(down).To(Equal(tt.isDown))

			md, err := inst.InstanceMetadata(ctx, tt.node)
			if !tt.exists {
				g.Expect(err).To(MatchError(k8scloud.InstanceNotFound))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(md.ProviderID).To(Equal("kubevirt://" + tt.vm))
			g.Expect(md.NodeAddresses).To(Equal(tt.addresses))
			g.Expect(md.Zone).To(BeEmpty())
		})
	}
}
