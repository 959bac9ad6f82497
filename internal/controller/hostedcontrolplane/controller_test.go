package hostedcontrolplane_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	"github.com/knest-dev/knest/internal/controller/hostedcontrolplane"
	"github.com/knest-dev/knest/internal/manager"
	"github.com/knest-dev/knest/internal/testenv"
	"github.com/knest-dev/knest/pkg/hosted"
)

// The tests here run knest's controllers, the manager as deployed, on the test bed
// of suite_test.go.

// env is the test bed TestMain started (suite_test.go).
func env() *testenv.Env { return hostedcontrolplane.Env() }

const (
	// timeout bounds a wait for what the controllers do; a minute, for a bed that shares
	// the machine with emulated VMs (a wait that succeeds ends sooner).
	timeout  = time.Minute
	interval = 100 * time.Millisecond
)

func startManager(t *testing.T) {
	t.Helper()
	mgr, err := manager.New(env().Config, manager.Options{Concurrency: 2, ToolImage: "knest.local/knest:test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
}

var newControlPlane = hostedcontrolplane.NewControlPlane

func available(g Gomega, hcp *hcpv1.HostedControlPlane) *metav1.Condition {
	env().Get(g, hcp)
	c := conditions.Get(hcp, hcpv1.AvailableCondition)
	g.Expect(c).NotTo(BeNil(), "no Available condition yet")
	return c
}

// etcdReady and apiServersRolledOut write what the StatefulSet's and Deployment's
// controllers would once the pods are ready.
func etcdReady(g Gomega, ns, name string) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hosted.EtcdName(name)}}
	env().Get(g, sts)
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 1, ReadyReplicas: 1, CurrentReplicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
	g.Expect(env().Client.Status().Update(context.Background(), sts)).To(Succeed())
}

func apiServersRolledOut(g Gomega, ns, name string) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hosted.DeploymentName(name)}}
	env().Get(g, d)
	n := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	g.Expect(env().Client.Status().Update(context.Background(), d)).To(Succeed())
}

// bootstrapJob is the kubeadm Job of the control plane's current configuration.
func bootstrapJob(g Gomega, ns, name string) *batchv1.Job {
	jobs := &batchv1.JobList{}
	g.Expect(env().Client.List(context.Background(), jobs, client.InNamespace(ns), client.MatchingLabels(hosted.JobSelector(name)))).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1))
	return &jobs.Items[0]
}

// The contract Cluster API reads, from first apply to Available: the endpoint is
// the Service's address, the cluster's certificates are made once and kept, and the
// control plane is initialized only when etcd, an API server at the spec's version
// and kubeadm's phases in the tenant are done.
func TestControlPlaneComesUpThroughItsContract(t *testing.T) {
	g := NewWithT(t)
	startManager(t)
	c, hcp := newControlPlane(t, g, "demo")
	ns := c.Namespace

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hosted.ServiceName(c.Name)}}
	g.Eventually(func(g Gomega) {
		env().Get(g, svc)
		env().Get(g, hcp)
		g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		g.Expect(hcp.Spec.ControlPlaneEndpoint).To(Equal(clusterv1.APIEndpoint{Host: svc.Spec.ClusterIP, Port: hosted.APIServerPort}))
		g.Expect(available(g, hcp).Reason).To(Equal(hcpv1.WaitingForEtcdReason))
		g.Expect(hcp.Status.ObservedGeneration).To(Equal(hcp.Generation))
		g.Expect(hcp.Status.EtcdPersistent).To(HaveValue(BeTrue()))
		g.Expect(hcp.Status.ExternalManagedControlPlane).To(HaveValue(BeTrue()))
		g.Expect(ptr.Deref(hcp.Status.Initialization.ControlPlaneInitialized, false)).To(BeFalse())
	}, timeout, interval).Should(Succeed())

	// Cluster API's Secrets, owned by the control plane, each made once.
	purposes := []secret.Purpose{secret.ClusterCA, secret.EtcdCA, secret.FrontProxyCA, secret.ServiceAccount, secret.Kubeconfig}
	made := map[secret.Purpose]madeSecret{}
	for _, p := range purposes {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret.Name(c.Name, p)}}
		g.Eventually(func() error { return env().Client.Get(context.Background(), client.ObjectKeyFromObject(s), s) }, timeout, interval).Should(Succeed())
		g.Expect(metav1.GetControllerOf(s)).To(HaveField("UID", hcp.UID), s.Name)
		made[p] = madeSecret{uid: string(s.UID), crt: string(s.Data[secret.TLSCrtDataName])}
	}

	etcdReady(g, ns, c.Name)
	g.Eventually(func(g Gomega) {
		g.Expect(available(g, hcp).Reason).To(Equal(hcpv1.WaitingForAPIServerReason))
	}, timeout, interval).Should(Succeed())
	apiServersRolledOut(g, ns, c.Name)
	var job *batchv1.Job
	g.Eventually(func(g Gomega) {
		g.Expect(available(g, hcp).Reason).To(Equal(hcpv1.WaitingForTenantReason))
		// Inside the wait: Cluster API's patch helper writes the conditions and the
		// rest of the status in two requests, and a read can fall between them.
		g.Expect(hcp.Status.Version).To(Equal(hcp.Spec.Version))
		job = bootstrapJob(g, ns, c.Name)
	}, timeout, interval).Should(Succeed())
	g.Expect(testenv.EndJob(context.Background(), env().Client, job, false)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(available(g, hcp).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(hcp.Status.Initialization.ControlPlaneInitialized).To(HaveValue(BeTrue()))
		g.Expect(hcp.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(hcp.Status.UpToDateReplicas).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(hcp.Status.ObservedGeneration).To(Equal(hcp.Generation))
	}, timeout, interval).Should(Succeed())

	for _, p := range purposes[:4] { // the kubeconfig's client certificate is renewed near its end
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret.Name(c.Name, p)}}
		env().Get(g, s)
		g.Expect(madeSecret{uid: string(s.UID), crt: string(s.Data[secret.TLSCrtDataName])}).To(Equal(made[p]), "%s made anew", s.Name)
	}

	// At rest, a reconcile writes nothing: the Cluster's change maps to the control
	// plane, whose objects and status keep their resource versions.
	// Settled first: the reconciles the Job's end started are over.
	var before map[string]string
	g.Eventually(func(g Gomega) {
		before = versions(g, ns)
		time.Sleep(time.Second)
		g.Expect(versions(g, ns)).To(Equal(before))
	}, timeout, interval).Should(Succeed())
	for _, kind := range []string{"HostedControlPlane/" + hcp.Name, "PodDisruptionBudget/" + hosted.EtcdName(c.Name), "NetworkPolicy/" + hosted.APIPolicyName(c.Name)} {
		g.Expect(before).To(HaveKey(kind))
	}
	env().Get(g, c)
	c.Annotations = map[string]string{"knest.dev/test": "poke"}
	g.Expect(env().Client.Update(context.Background(), c)).To(Succeed())
	time.Sleep(3 * time.Second)
	g.Expect(versions(g, ns)).To(Equal(before), "an object rewritten at rest")
}

// madeSecret is what tells a Secret made anew: its UID and certificate.
type madeSecret struct{ uid, crt string }

// versions are the resource versions of the control plane and of everything it
// makes in ns.
func versions(g Gomega, ns string) map[string]string {
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"HostedControlPlane": &hcpv1.HostedControlPlaneList{}, "Deployment": &appsv1.DeploymentList{},
		"StatefulSet": &appsv1.StatefulSetList{}, "Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{},
		"Secret": &corev1.SecretList{}, "NetworkPolicy": &networkingv1.NetworkPolicyList{}, "Job": &batchv1.JobList{},
		"ClusterResourceSet": &addonsv1.ClusterResourceSetList{}, "PodDisruptionBudget": &policyv1.PodDisruptionBudgetList{},
	}
	for kind, list := range lists {
		g.Expect(env().Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		items, err := apimeta.ExtractList(list)
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			o, err := apimeta.Accessor(item)
			g.Expect(err).NotTo(HaveOccurred())
			out[kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

// A reconcile that fails leaves observedGeneration at the last generation that went
// through, and says why; the next one that succeeds moves it.
func TestObservedGenerationOnlyOnSuccess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	c, hcp := newControlPlane(t, g, "gen")
	g.Eventually(func(g Gomega) {
		env().Get(g, hcp)
		g.Expect(hcp.Status.ObservedGeneration).To(Equal(hcp.Generation))
		env().Get(g, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: hosted.DeploymentName(c.Name)}})
	}, timeout, interval).Should(Succeed())
	observed := hcp.Generation

	// The host refuses every change of Deployments in the namespace.
	const refusal = "knest test: Deployments are refused here"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "refuse-deployments-"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: refusal}},
		},
	}
	g.Expect(env().Client.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = env().Client.Delete(ctx, policy) })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "refuse-deployments-"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: c.Namespace}}},
		},
	}
	g.Expect(env().Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = env().Client.Delete(ctx, binding) })
	// A policy is in force a moment after it is made: until a dry run is refused.
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "probe"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
			},
		},
	}
	g.Eventually(func() error { return env().Client.Create(ctx, probe.DeepCopy(), client.DryRunAll) }, timeout, interval).Should(
		MatchError(ContainSubstring(refusal)))

	// Three API servers: the Deployment must change, and cannot.
	env().Get(g, hcp)
	hcp.Spec.Replicas = ptr.To[int32](3)
	g.Expect(env().Client.Update(ctx, hcp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cond := available(g, hcp)
		g.Expect(cond.Reason).To(Equal(hcpv1.ReconcileFailedReason))
		g.Expect(cond.Message).To(ContainSubstring(refusal))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		env().Get(g, hcp)
		g.Expect(hcp.Generation).To(BeNumerically(">", observed))
		g.Expect(hcp.Status.ObservedGeneration).To(Equal(observed))
	}, 2*time.Second, interval).Should(Succeed())

	g.Expect(env().Client.Delete(ctx, binding)).To(Succeed())
	g.Eventually(func(g Gomega) {
		env().Get(g, hcp)
		g.Expect(hcp.Status.ObservedGeneration).To(Equal(hcp.Generation))
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: hosted.DeploymentName(c.Name)}}
		env().Get(g, d)
		g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
	}, timeout, interval).Should(Succeed())
}

// A claim of etcd's that the StatefulSet controller makes once the control plane is
// at rest is news to it (the claims' watch) and gets it as an owner; the cluster's
// other claims do not.
func TestEtcdClaimIsAdoptedWhenMade(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	c, hcp := newControlPlane(t, g, "claims")
	ns := c.Namespace
	g.Eventually(func(g Gomega) {
		g.Expect(available(g, hcp).Reason).To(Equal(hcpv1.WaitingForEtcdReason))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		before := versions(g, ns)
		time.Sleep(time.Second)
		g.Expect(versions(g, ns)).To(Equal(before))
	}, timeout, interval).Should(Succeed())

	claim := func(name string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		g.Expect(env().Client.Create(ctx, pvc)).To(Succeed())
		return pvc
	}
	other := claim("data-" + c.Name + "-worker-0")
	etcd := claim(hosted.EtcdClaimName(c.Name, 0))
	g.Eventually(func(g Gomega) {
		env().Get(g, etcd)
		g.Expect(etcd.OwnerReferences).To(ConsistOf(And(
			HaveField("UID", hcp.UID), HaveField("Kind", "HostedControlPlane"), HaveField("Controller", BeNil()))))
	}, timeout, interval).Should(Succeed())
	env().Get(g, other)
	g.Expect(other.OwnerReferences).To(BeEmpty())
}
