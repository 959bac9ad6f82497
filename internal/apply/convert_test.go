package apply

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, capkv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestToApplyConfigurationLeavesOutWhatKnestDoesNotOwn(t *testing.T) {
	g := NewWithT(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", ResourceVersion: "7",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	u, err := toApplyConfiguration(svc, scheme(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.GetAPIVersion()).To(Equal("v1"))
	g.Expect(u.GetKind()).To(Equal("Service"))
	g.Expect(u.Object).NotTo(HaveKey("status"))
	meta := u.Object["metadata"].(map[string]any)
	g.Expect(meta).NotTo(HaveKey("creationTimestamp"))
	g.Expect(meta).NotTo(HaveKey("resourceVersion"))
	g.Expect(meta).NotTo(HaveKey("managedFields"))
}

// Cluster API's v1beta2 types leave zero structs out (omitzero); an apply that sent
// them would be refused by the schemas.
func TestToApplyConfigurationHonoursOmitzero(t *testing.T) {
	g := NewWithT(t)
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	u, err := toApplyConfiguration(c, scheme(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.GetKind()).To(Equal("Cluster"))
	_, found, _ := unstructured.NestedMap(u.Object, "spec", "controlPlaneRef")
	g.Expect(found).To(BeFalse())
}

// An endpoint knest does not fix is CAPK's to write: not applied empty.
func TestToApplyConfigurationLeavesCAPKsEndpoint(t *testing.T) {
	g := NewWithT(t)
	kc := &capkv1.KubevirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k"}}
	u, err := toApplyConfiguration(kc, scheme(t))
	g.Expect(err).NotTo(HaveOccurred())
	_, found, _ := unstructured.NestedMap(u.Object, "spec", "controlPlaneEndpoint")
	g.Expect(found).To(BeFalse())

	kc.Spec.ControlPlaneEndpoint = capkv1.APIEndpoint{Host: "api.example", Port: 6443}
	u, err = toApplyConfiguration(kc, scheme(t))
	g.Expect(err).NotTo(HaveOccurred())
	host, _, _ := unstructured.NestedString(u.Object, "spec", "controlPlaneEndpoint", "host")
	g.Expect(host).To(Equal("api.example"))
}

func TestNotOwnedErrorNamesTheOwner(t *testing.T) {
	g := NewWithT(t)
	err := &NotOwnedError{Kind: "NetworkPolicy", Name: "taken-isolation", OwnerKind: "NestedCluster", Owner: "taken"}
	g.Expect(err.Error()).To(HavePrefix("NetworkPolicy taken-isolation already exists and does not belong to NestedCluster taken; "))
}
