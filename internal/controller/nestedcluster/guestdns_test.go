package nestedcluster_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/internal/manager"
	"github.com/knest-dev/knest/internal/testenv"
)

// With --guest-dns-service, tenant VMs get that Service's address as their only DNS
// server. Without the Service the controller does not start, saying what is
// missing: its VMs would otherwise quietly resolve through the host.
func TestVMsGetTheGuestDNSOfTheController(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: namespace(t), Name: "guest-dns"}
	opts := manager.Options{Concurrency: 2, ToolImage: testToolImage, GuestDNSService: key}
	_, err := manager.New(env.Config, opts)
	g.Expect(err).To(MatchError(ContainSubstring("--guest-dns-service")))

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "guest-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}
	g.Expect(env.Client.Create(ctx, svc)).To(Succeed())
	startControllerWith(t, env.Config, opts)
	nc := testenv.NestedCluster(namespace(t), "dns")
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &capkv1.KubevirtMachineTemplateList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(nc.Namespace))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(2), "the control plane's and the pool's")
		for _, tmpl := range list.Items {
			vmi := tmpl.Spec.Template.Spec.VirtualMachineTemplate.Spec.Template.Spec
			g.Expect(vmi.DNSPolicy).To(Equal(corev1.DNSNone), tmpl.Name)
			g.Expect(vmi.DNSConfig.Nameservers).To(Equal([]string{svc.Spec.ClusterIP}), tmpl.Name)
		}
	}, timeout, interval).Should(Succeed())
}
