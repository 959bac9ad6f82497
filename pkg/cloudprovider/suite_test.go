package cloudprovider_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	k8scloud "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cloudprovider"
	"github.com/knest-dev/knest/pkg/vmtemplate"
)

// The tests run the provider against one real kube-apiserver (with the KubeVirt
// CRDs) that is both the host, in a namespace of the tenant's, and the tenant, in
// another namespace for its Services and EndpointSlices (and cluster-scoped Nodes,
// named after the test's namespace). The provider takes only clients and names, so
// nothing tells it the two are one server.

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env)
}

const (
	timeout  = 20 * time.Second
	interval = 100 * time.Millisecond
)

// bed is one test's host namespace and tenant namespace.
type bed struct {
	host, tenant string
	tenantClient kubernetes.Interface
}

func newBed(t *testing.T, g Gomega) *bed {
	t.Helper()
	return &bed{host: namespace(t, g), tenant: namespace(t, g), tenantClient: kubernetes.NewForConfigOrDie(env.Config)}
}

func namespace(t *testing.T, g Gomega) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cp-"}}
	g.Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// provider is a provider for cluster in the bed's host namespace.
func (b *bed) provider(t *testing.T, g Gomega, cluster string) *cloudprovider.Provider {
	t.Helper()
	p, err := cloudprovider.New(cloudprovider.Options{
		ClusterName: cluster, Namespace: b.host, Host: env.Client, Tenant: b.tenantClient,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return p
}

// loadBalancer is the provider's LoadBalancer interface.
func loadBalancer(g Gomega, p *cloudprovider.Provider) k8scloud.LoadBalancer {
	lb, ok := p.LoadBalancer()
	g.Expect(ok).To(BeTrue())
	return lb
}

// tenantService creates a tenant Service of type LoadBalancer without a selector
// (its EndpointSlices are the test's to write, not the bed's EndpointSlice
// controller's); the API server allocates its node ports.
func (b *bed) tenantService(g Gomega, name string, policy corev1.ServiceExternalTrafficPolicy, ports ...corev1.ServicePort) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.tenant},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: policy,
			Ports:                 ports,
		},
	}
	g.Expect(env.Client.Create(context.Background(), svc)).To(Succeed())
	for _, p := range svc.Spec.Ports {
		g.Expect(p.NodePort).NotTo(BeZero())
	}
	return svc
}

func tcp(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

// hostService reads the host Service of svc.
func (b *bed) hostService(g Gomega, svc *corev1.Service) *corev1.Service {
	host := &corev1.Service{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: b.host, Name: hostName(svc)}, host)).To(Succeed())
	return host
}

func hostName(svc *corev1.Service) string {
	return k8scloud.DefaultLoadBalancerName(svc)
}

// ensure calls EnsureLoadBalancer, which may only fail for want of an address.
func ensure(g Gomega, lb k8scloud.LoadBalancer, cluster string, svc *corev1.Service, nodes []*corev1.Node) {
	_, err := lb.EnsureLoadBalancer(context.Background(), cluster, svc, nodes)
	var retry *api.RetryError
	if err != nil && !errors.As(err, &retry) {
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// setAddress writes the host Service's load balancer address, as MetalLB would.
func setAddress(g Gomega, host *corev1.Service, ip string) {
	host.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
	g.Expect(env.Client.Status().Update(context.Background(), host)).To(Succeed())
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// worker creates the host VM of a tenant node and, with hostNode set, its running
// VMI on that host node with address ip on the pod network; role is CAPK's
// cluster.x-k8s.io/role label.
func (b *bed) vm(g Gomega, cluster, name, role, hostNode, ip string) {
	ctx := context.Background()
	tmpl := vmtemplate.Build(vmtemplate.Input{ClusterName: cluster, Pool: "workers", Image: "knest.local/node:test"})
	labels := map[string]string{"cluster.x-k8s.io/cluster-name": cluster, "cluster.x-k8s.io/role": role}
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.host, Labels: labels},
		Spec:       tmpl.Spec,
	}
	vm.Spec.DataVolumeTemplates = nil
	g.Expect(env.Client.Create(ctx, vm)).To(Succeed())
	if hostNode == "" {
		return
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.host, Labels: labels},
		Spec:       tmpl.Spec.Template.Spec,
	}
	g.Expect(env.Client.Create(ctx, vmi)).To(Succeed())
	setVMIStatus(g, vmi, kubevirtv1.VirtualMachineInstanceStatus{
		Phase:    kubevirtv1.Running,
		NodeName: hostNode,
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: vmtemplate.PodNetworkName, IP: ip, IPs: []string{ip}},
			// What a guest agent reports of the tenant's CNI: not the VM's address.
			{InterfaceName: "cni0", IP: "10.244.9.1", IPs: []string{"10.244.9.1"}},
		},
	})
}

// setVMIStatus writes a VMI's status as virt-handler would.
func setVMIStatus(g Gomega, vmi *kubevirtv1.VirtualMachineInstance, status kubevirtv1.VirtualMachineInstanceStatus) {
	env.SetVMIStatus(g, vmi, func(s *kubevirtv1.VirtualMachineInstanceStatus) { *s = status })
}

// node creates a tenant Node for the VM vm (provider ID kubevirt://vm); its name
// is unique to the test.
func (b *bed) node(g Gomega, vm string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s", b.tenant, vm)},
		Spec:       corev1.NodeSpec{ProviderID: "kubevirt://" + vm},
	}
	g.Expect(env.Client.Create(context.Background(), n)).To(Succeed())
	return n
}

// endpoints writes the tenant EndpointSlice of svc: one endpoint per node, ready
// as given.
func (b *bed) endpoints(g Gomega, svc *corev1.Service, ready map[*corev1.Node]bool) {
	ctx := context.Background()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc.Name,
			discoveryv1.LabelManagedBy:   "test.knest.dev",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	i := 0
	for n, r := range ready {
		i++
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.%d.5", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)},
			NodeName:   ptr.To(n.Name),
		})
	}
	existing := &discoveryv1.EndpointSlice{}
	switch err := env.Client.Get(ctx, client.ObjectKeyFromObject(slice), existing); {
	case err == nil:
		existing.Endpoints = slice.Endpoints
		g.Expect(env.Client.Update(ctx, existing)).To(Succeed())
	case isNotFound(err):
		g.Expect(env.Client.Create(ctx, slice)).To(Succeed())
	default:
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// hostEndpoints returns the addresses and host nodes of the host EndpointSlice of
// svc, "ip@node", or nil when there is no slice.
func (b *bed) hostEndpoints(g Gomega, svc *corev1.Service) []string {
	slice := &discoveryv1.EndpointSlice{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: b.host, Name: hostName(svc)}, slice)
	if isNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	out := []string{}
	for _, ep := range slice.Endpoints {
		out = append(out, ep.Addresses[0]+"@"+ptr.Deref(ep.NodeName, ""))
	}
	return out
}
