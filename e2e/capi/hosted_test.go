//go:build e2e

package capi_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	capkv1 "sigs.k8s.io/cluster-api-provider-kubevirt/api/v1alpha1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hcpv1 "github.com/knest-dev/knest/api/controlplane/v1alpha1"
	knestv1 "github.com/knest-dev/knest/api/v1alpha1"
	"github.com/knest-dev/knest/pkg/cluster"
	"github.com/knest-dev/knest/pkg/hosted"
)

// TestHostedControlPlaneContract runs a hosted NestedCluster against the real Cluster
// API and CAPK managers. The test bed runs no workload controllers and no kubelet, so
// the test plays them: it writes the Deployment's, StatefulSet's and Job's status as
// their controllers would, including the states that must not read as done (a
// generation not yet observed, a rollout with old pods left).
func TestHostedControlPlaneContract(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	t.Cleanup(func() { printLogsOnFailure(t) })
	startController(t)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-hosted-", Labels: map[string]string{knestv1.TenantNamespaceLabel: "true"}}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	nc := &knestv1.NestedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns.Name},
		Spec: knestv1.NestedClusterSpec{
			ControlPlane: knestv1.ControlPlaneSpec{Mode: knestv1.ControlPlaneHosted, Replicas: 1},
			Workers:      []knestv1.WorkerPool{{Name: "workers", Replicas: ptr.To(int32(1))}},
			APIServer:    knestv1.APIServerSpec{CertSANs: []string{"demo.tenant.example"}},
		},
	}
	g.Expect(env.Client.Create(ctx, nc)).To(Succeed())
	key := client.ObjectKeyFromObject(nc)
	in := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns.Name, Name: name} }

	// Cluster API owns the HostedControlPlane; knest's provider makes the Cluster's
	// certificate Secrets (Cluster API's names and type), the API Service and the
	// endpoint; the infrastructure is ready without CAPK's Service and SSH keys.
	hcp := &hcpv1.HostedControlPlane{}
	c := &clusterv1.Cluster{}
	svc := &corev1.Service{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, c)).To(Succeed())
		g.Expect(env.Client.Get(ctx, in(cluster.ControlPlaneName("demo")), hcp)).To(Succeed())
		g.Expect(hcp.OwnerReferences).To(ContainElement(HaveField("UID", c.UID)))
		g.Expect(env.Client.Get(ctx, in(hosted.ServiceName("demo")), svc)).To(Succeed())
		g.Expect(hcp.Spec.ControlPlaneEndpoint.Host).To(Equal(svc.Spec.ClusterIP))
		g.Expect(ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue(), "Cluster status: %+v", c.Status)
	}, timeout, interval).Should(Succeed())
	for _, name := range []string{"demo-ca", "demo-etcd", "demo-proxy", "demo-sa", "demo-kubeconfig"} {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, in(name), s)).To(Succeed(), name)
		g.Expect(s.Type).To(Equal(clusterv1.ClusterSecretType), name)
		g.Expect(s.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "demo"), name)
		g.Expect(metav1.IsControlledBy(s, hcp)).To(BeTrue(), "%s owners: %+v", name, s.OwnerReferences)
	}
	kubeconfig, err := clientcmd.Load(secretValue(ctx, g, in("demo-kubeconfig")))
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range kubeconfig.Clusters {
		g.Expect(c.Server).To(Equal("https://" + svc.Spec.ClusterIP + ":6443"))
	}
	kc := &capkv1.KubevirtCluster{}
	g.Expect(env.Client.Get(ctx, key, kc)).To(Succeed())
	g.Expect(kc.Annotations).To(HaveKey(clusterv1.ManagedByAnnotation))
	g.Expect(kc.Spec.SshKeys.DataSecretName).To(BeNil(), "CAPK must leave an externally managed KubevirtCluster alone")
	g.Expect(env.Client.Get(ctx, in("demo-lb"), &corev1.Service{})).To(Satisfy(apierrors.IsNotFound))

	// The test bed has no StorageClass: etcd waits for one rather than falling back
	// to an emptyDir, and both objects say why.
	deploy := &appsv1.Deployment{}
	sts := &appsv1.StatefulSet{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp)).To(Succeed())
		g.Expect(conditions.GetReason(hcp, hcpv1.AvailableCondition)).To(Equal(hcpv1.NoStorageClassReason))
		g.Expect(env.Client.Get(ctx, key, nc)).To(Succeed())
		g.Expect(conditions.Get(nc, knestv1.ControlPlaneReadyCondition)).To(And(
			HaveField("Reason", hcpv1.NoStorageClassReason), HaveField("Message", ContainSubstring("controlPlane.etcd.storageClassName"))))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.Client.Get(ctx, in(hosted.EtcdName("demo")), sts)).To(Satisfy(apierrors.IsNotFound))

	// A default class appears: etcd gets a claim of it.
	class := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: "e2e-default-", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "example.com/none",
	}
	g.Expect(env.Client.Create(ctx, class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })

	// The host objects, at the version's preloaded images.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, in(hosted.DeploymentName("demo")), deploy)).To(Succeed())
		g.Expect(env.Client.Get(ctx, in(hosted.EtcdName("demo")), sts)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
	g.Expect(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(HaveValue(Equal(class.Name)))
	g.Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted).To(Equal(appsv1.RetainPersistentVolumeClaimRetentionPolicyType))
	// etcd's certificates come from the controller, signed by Cluster API's etcd CA.
	etcdCerts := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, in(hosted.EtcdCertsName("demo")), etcdCerts)).To(Succeed())
	g.Expect(metav1.IsControlledBy(etcdCerts, hcp)).To(BeTrue())
	g.Expect(etcdCerts.Data).To(HaveKey(hosted.EtcdServerCertKey))
	g.Expect(hosted.EtcdCertificatesCurrent(etcdCerts.Data, "demo", ns.Name, secretData(ctx, g, in("demo-etcd"))["tls.crt"], time.Now())).To(BeTrue())

	// The claim the StatefulSet controller makes (the test bed runs none; the test
	// plays it) is adopted by the HostedControlPlane: it outlives the StatefulSet and
	// goes with the cluster.
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-" + hosted.EtcdName("demo") + "-0", Namespace: ns.Name, Labels: sts.Spec.VolumeClaimTemplates[0].Labels},
		Spec:       sts.Spec.VolumeClaimTemplates[0].Spec,
	}
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(claim.OwnerReferences).To(ContainElement(HaveField("UID", hcp.UID)))
	}, timeout, interval).Should(Succeed())
	// An accidental delete of the StatefulSet: made anew, its volume kept.
	g.Expect(env.Client.Delete(ctx, sts)).To(Succeed())
	g.Eventually(func(g Gomega) {
		fresh := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sts), fresh)).To(Succeed())
		g.Expect(fresh.UID).NotTo(Equal(sts.UID))
		*sts = *fresh
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(claim.DeletionTimestamp).To(BeNil())
	}, 2*time.Second, interval).Should(Succeed())
	keep(t, "hosted-deployment.yaml", deploy)
	keep(t, "hosted-etcd.yaml", sts)
	pod := deploy.Spec.Template.Spec
	g.Expect(pod.Containers).To(ContainElement(And(
		HaveField("Image", "registry.k8s.io/kube-apiserver:"+knestv1.DefaultVersion),
		HaveField("ImagePullPolicy", corev1.PullIfNotPresent),
		HaveField("Command", ContainElement("--advertise-address="+svc.Spec.ClusterIP)),
	)))
	g.Expect(pod.InitContainers).To(ContainElement(HaveField("Image", "knest.local/kubeadm:"+knestv1.DefaultVersion)))
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, in(hosted.ConfigMapName("demo")), cm)).To(Succeed())
	g.Expect(cm.Data["kubeadm.yaml"]).To(And(ContainSubstring("demo.tenant.example"),
		ContainSubstring("controlPlaneEndpoint: "+svc.Spec.ClusterIP+":6443"), ContainSubstring("podSubnet: "+knestv1.DefaultPodCIDR)))

	// Not initialized while nothing runs: no Job, Cluster API waits.
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp)).To(Succeed())
		g.Expect(hcp.Status.Initialization.ControlPlaneInitialized).To(BeNil())
	}, 3*time.Second, interval).Should(Succeed())

	// etcd ready, the API server pod available at the version: the kubeadm Job.
	setStatefulSetReady(ctx, g, sts)
	setDeploymentStatus(ctx, g, deploy, 1, 1, 1)
	job := &batchv1.Job{}
	g.Eventually(func(g Gomega) {
		jobs := &batchv1.JobList{}
		g.Expect(env.Client.List(ctx, jobs, client.InNamespace(ns.Name), client.MatchingLabels(hosted.JobSelector("demo")))).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1))
		*job = jobs.Items[0]
	}, timeout, interval).Should(Succeed())
	g.Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal("knest.local/kubeadm:" + knestv1.DefaultVersion))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp)).To(Succeed())
	g.Expect(hcp.Status.Version).To(Equal(knestv1.DefaultVersion))
	g.Expect(hcp.Status.Initialization.ControlPlaneInitialized).To(BeNil(), "initialized before kubeadm's phases ran in the tenant")

	// The Job fails: status says so, and after its backoff (10 s for the first
	// failure) the Job is made anew rather than waited for forever.
	setJobFailed(ctx, g, job)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp)).To(Succeed())
		g.Expect(conditions.Get(hcp, hcpv1.AvailableCondition)).To(And(HaveField("Reason", hcpv1.TenantBootstrapFailedReason),
			HaveField("Message", And(ContainSubstring(job.Name), ContainSubstring("BackoffLimitExceeded"), ContainSubstring("retrying in")))))
		g.Expect(hcp.Status.FailedBootstrapJobs).To(Equal(int32(1)))
		g.Expect(env.Client.Get(ctx, key, nc)).To(Succeed())
		g.Expect(conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition)).To(Equal(hcpv1.TenantBootstrapFailedReason))
	}, timeout, interval).Should(Succeed())
	failedUID := job.UID
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.UID).NotTo(Equal(failedUID))
	}, timeout, interval).Should(Succeed())

	// The Job done: initialized; Cluster API takes the endpoint and starts the workers.
	setJobComplete(ctx, g, job)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, c)).To(Succeed())
		g.Expect(ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false)).To(BeTrue(), "Cluster status: %+v", c.Status)
		g.Expect(c.Spec.ControlPlaneEndpoint).To(Equal(clusterv1.APIEndpoint{Host: svc.Spec.ClusterIP, Port: 6443}))
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns.Name))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1), "a worker and no control-plane machine")
		g.Expect(machines.Items[0].Labels).NotTo(HaveKey(clusterv1.MachineControlPlaneLabel))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp)).To(Succeed())
	g.Expect(hcp.Status.Selector).To(ContainSubstring(hosted.ComponentLabel + "=" + hosted.ComponentAPIServer))
	// Without it Cluster API neither drains nor deletes a removed worker's Node.
	g.Expect(hcp.Status.ExternalManagedControlPlane).To(HaveValue(BeTrue()))
	g.Expect(conditions.IsTrue(hcp, hcpv1.AvailableCondition)).To(BeTrue(), "conditions: %+v", hcp.Status.Conditions)
	templates := &capkv1.KubevirtMachineTemplateList{}
	g.Expect(env.Client.List(ctx, templates, client.InNamespace(ns.Name))).To(Succeed())
	g.Expect(templates.Items).To(HaveLen(1))
	g.Expect(templates.Items[0].Spec.Template.Spec.BootstrapCheckSpec.CheckStrategy).To(Equal(cluster.BootstrapCheckNone))

	// Scale to 3 API servers: the Deployment follows; the NestedCluster is not ready
	// while the new pods are not available.
	updateSpec(ctx, g, nc, func() { nc.Spec.ControlPlane.Replicas = 3 })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
		g.Expect(deploy.Spec.Replicas).To(HaveValue(Equal(int32(3))))
	}, timeout, interval).Should(Succeed())
	setDeploymentStatus(ctx, g, deploy, 3, 3, 1)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, nc)).To(Succeed())
		g.Expect(nc.Status.ControlPlane).To(Equal(knestv1.ReplicaStatus{Desired: 3, Current: 3, Ready: 1, UpToDate: 3}))
		g.Expect(conditions.GetReason(nc, knestv1.ControlPlaneReadyCondition)).To(Equal(knestv1.ScalingUpReason))
	}, timeout, interval).Should(Succeed())

	// Upgrade: a new pod template; until the Deployment controller has observed it
	// and every pod runs it, the control plane reports the old version.
	updateSpec(ctx, g, nc, func() { nc.Spec.Version = "v1.35.5" })
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
		g.Expect(deploy.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.k8s.io/kube-apiserver:v1.35.5"))
		g.Expect(env.Client.Get(ctx, key, nc)).To(Succeed())
		g.Expect(nc.Status.Version).To(Equal(knestv1.DefaultVersion))
		// (Still Provisioning: without kubelets the worker never joined, so the
		// cluster was never Ready.)
		g.Expect(conditions.Get(nc, knestv1.ControlPlaneReadyCondition)).To(And(
			HaveField("Reason", knestv1.RollingOutReason), HaveField("Message", ContainSubstring("v1.35.5"))))
	}, timeout, interval).Should(Succeed())
	setDeploymentStatus(ctx, g, deploy, 3, 3, 3)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(hcp), hcp)).To(Succeed())
		g.Expect(hcp.Status.Version).To(Equal("v1.35.5"))
	}, timeout, interval).Should(Succeed())
	// A patch upgrade leaves etcd's single member running.
	etcdGeneration := sts.Generation
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
	g.Expect(sts.Generation).To(Equal(etcdGeneration), "a patch upgrade changed etcd's StatefulSet")
	g.Expect(provs.Err()).NotTo(HaveOccurred())

	// Delete: nothing left, the control plane's host objects included.
	g.Expect(env.Client.Delete(ctx, nc)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, key, &knestv1.NestedCluster{})
	}, timeout, interval).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func(g Gomega) {
		g.Expect(leftovers(ctx, ns.Name)).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
}

// updateSpec changes nc's spec with mutate as a user would: read, change, write,
// again on a conflict (the controller writes its status meanwhile, which moves the
// resourceVersion).
func updateSpec(ctx context.Context, g Gomega, nc *knestv1.NestedCluster, mutate func()) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			return err
		}
		mutate()
		return env.Client.Update(ctx, nc)
	})).To(Succeed())
}

func secretData(ctx context.Context, g Gomega, key client.ObjectKey) map[string][]byte {
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, key, s)).To(Succeed())
	return s.Data
}

func secretValue(ctx context.Context, g Gomega, key client.ObjectKey) []byte {
	s := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, key, s)).To(Succeed())
	return s.Data["value"]
}

// setDeploymentStatus writes what the Deployment controller would for the
// Deployment's current generation.
func setDeploymentStatus(ctx context.Context, g Gomega, d *appsv1.Deployment, replicas, updated, available int32) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: available, AvailableReplicas: available, UnavailableReplicas: replicas - available}
		g.Expect(env.Client.Status().Update(ctx, d)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func setStatefulSetReady(ctx context.Context, g Gomega, s *appsv1.StatefulSet) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			CurrentReplicas: 1, UpdatedReplicas: 1}
		g.Expect(env.Client.Status().Update(ctx, s)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// setJobFailed writes a failed Job's status as the Job controller does once the
// backoff limit is reached (FailureTarget before Failed).
func setJobFailed(ctx context.Context, g Gomega, j *batchv1.Job) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(j), j)).To(Succeed())
		now := metav1.Now()
		j.Status = batchv1.JobStatus{StartTime: &now, Failed: 7, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
				Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded,
				Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		}}
		g.Expect(env.Client.Status().Update(ctx, j)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// setJobComplete writes a succeeded Job's status as the Job controller does (the API
// server requires the success criteria before Complete).
func setJobComplete(ctx context.Context, g Gomega, j *batchv1.Job) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(j), j)).To(Succeed())
		now := metav1.Now()
		j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}
		g.Expect(env.Client.Status().Update(ctx, j)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}
