package hostedcontrolplane

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/hosted"
)

// Every test of the package, this one's and hostedcontrolplane_test's, runs against
// one real kube-apiserver, etcd and kube-controller-manager with the real Cluster
// API CRDs. No kubelet runs and no Cluster API reconciler: tests write the status a
// StatefulSet's, a Deployment's and a Job's controllers would, and the owner
// reference Cluster API sets on a control plane. The tests here call one step of
// the reconcile; those in controller_test.go run the manager as deployed, which
// imports this package and so cannot be in it.

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.Main(m, &env)
}

// newControlPlane creates a Cluster and its HostedControlPlane in a namespace of
// their own, owned by the Cluster as Cluster API's Cluster controller makes it.
func newControlPlane(t *testing.T, g Gomega, name string) (*clusterv1.Cluster, *hcpv1.HostedControlPlane) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hcp-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: hcpv1.GroupVersion.Group, Kind: "HostedControlPlane", Name: cluster.ControlPlaneName(name)}},
	}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	hcp := &hcpv1.HostedControlPlane{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns.Name, Name: cluster.ControlPlaneName(name),
			Labels: map[string]string{clusterv1.ClusterNameLabel: name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID}},
		},
		Spec: hcpv1.HostedControlPlaneSpec{
			Version: "v1.35.4", Replicas: ptr.To[int32](1),
			Network: hcpv1.NetworkSpec{PodCIDR: "10.243.0.0/16", ServiceCIDR: "10.95.0.0/16", DNSDomain: "cluster.local"},
			Etcd:    hcpv1.EtcdSpec{StorageClassName: "standard"},
		},
	}
	g.Expect(env.Client.Create(ctx, hcp)).To(Succeed())
	return c, hcp
}

// newTestScope is a reconcile's scope of a new control plane whose Service has
// the address serviceIP, for the tests of one step.
func newTestScope(t *testing.T, g Gomega, name, serviceIP string) *scope {
	t.Helper()
	c, hcp := newControlPlane(t, g, name)
	s := newScope(hcp, c)
	s.in = hosted.Input{HCP: hcp, Cluster: c.Name, ServiceIP: serviceIP}
	return s
}

func reconciler() *Reconciler { return &Reconciler{Client: env.Client} }
